#include "harness/sample_runner.h"

#include "press/kept_dump.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdio>

#include "generation/decode_loop.h"
#include "generation/lockstep_decode.h"
#include "util/error.h"

namespace kvc {

QueryMode parse_query_mode(const std::string& text) {
  if (text == "aware") return QueryMode::Aware;
  if (text == "agnostic") return QueryMode::Agnostic;
  fail("--query: unknown mode '{}' (use aware or agnostic)", text);
}

Truncation parse_truncation(const std::string& text) {
  if (text == "middle") return Truncation::Middle;
  if (text == "refuse") return Truncation::Refuse;
  fail("--truncate: unknown policy '{}' (use middle or refuse)", text);
}

PromptTokens cut_prompt_middle(const PromptTokens& prompt, int64_t max_tokens) {
  const int64_t half = max_tokens / 2;
  const int64_t total = prompt.size(), context_size = static_cast<int64_t>(prompt.context.size());
  if (total <= max_tokens) return prompt;
  // Each kept token stays on its side of the context/question split, so both query modes still feed
  // the same tokens.
  PromptTokens cut;
  for (int64_t i = 0; i < total; ++i) {
    if (i >= half && i < total - half) continue;
    const int token = i < context_size ? prompt.context[static_cast<size_t>(i)]
                                       : prompt.question[static_cast<size_t>(i - context_size)];
    (i < context_size ? cut.context : cut.question).push_back(token);
  }
  cut.dropped = prompt.dropped + total - 2 * half;
  return cut;
}

PromptTokens tokenize_prompt(const Tokenizer& tokenizer, const LlamaModel& model, const std::string& context_part,
                             const std::string& question_part, int64_t max_new_tokens, Truncation truncation,
                             const std::string& sample_id, int64_t max_prompt_tokens, BosChoice bos,
                             const ChatFormat* chat) {
  PromptTokens p;
  if (chat != nullptr) {
    const ChatTaskPrompt turn = render_task_prompt(*chat, tokenizer, context_part, question_part);
    p.context = encode_rendered_chat(tokenizer, turn.before_question, bos);
    p.question = tokenizer.encode_with_specials(turn.from_question);
  } else {
    p.context = tokenizer.encode_prompt(context_part, bos);
    p.question = tokenizer.encode(question_part);
  }
  const int64_t limit = model.config().max_position_embeddings;
  KVC_CHECK(max_prompt_tokens <= 0 || max_prompt_tokens + max_new_tokens <= limit,
            "--max-length {} + {} new tokens exceeds the model's context of {} (lower --max-length)", max_prompt_tokens,
            max_new_tokens, limit);
  const int64_t room = max_prompt_tokens > 0 ? max_prompt_tokens : limit - max_new_tokens;
  if (p.size() <= room) return p;
  KVC_CHECK(truncation == Truncation::Middle,
            "sample '{}': prompt of {} tokens + {} new tokens exceeds {} (use --truncate middle to cut the "
            "middle of the prompt, or shorter inputs)",
            sample_id, p.size(), max_new_tokens,
            max_prompt_tokens > 0 ? fmt::format("--max-length {}", max_prompt_tokens)
                                  : fmt::format("the model's context of {}", limit));
  KVC_CHECK(room >= 2, "sample '{}': {} new tokens leave no room for a prompt in the context of {}", sample_id,
            max_new_tokens, limit);
  const PromptTokens cut = cut_prompt_middle(p, room);
  std::fprintf(stderr, "warning: sample '%s': %lld tokens cut from the middle of the prompt to fit %lld\n",
               sample_id.c_str(), static_cast<long long>(cut.dropped), static_cast<long long>(room));
  return cut;
}

namespace {

int greedy(const at::Tensor& logits) { return static_cast<int>(logits[0].argmax().item<int64_t>()); }

// Payload bytes of the dense cache for `tokens` positions: keys and values, every layer and KV head.
int64_t dense_payload_bytes(const LlamaModel& model, int64_t tokens) {
  const ModelConfig& c = model.config();
  const CacheTypes types = model.cache_types();
  return tokens * c.num_layers * c.num_kv_heads *
         (stored_row_bytes(types.keys, c.head_dim) + stored_row_bytes(types.values, c.head_dim));
}

bool ends_answer_line(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r\n");
  return first != std::string::npos && text.find('\n', first) != std::string::npos;
}

}  // namespace

namespace {

// The output's measurements of the cache the prompt left, before decoding.
SampleOutput prompt_output(const LlamaModel& model, const KVCache& cache, const PromptTokens& prompt) {
  SampleOutput out;
  out.prompt_tokens = prompt.size();
  const CacheFootprint footprint = cache.footprint();
  out.kv_payload_bytes = footprint.payload_bytes;
  out.kv_ram_bytes = footprint.ram_bytes;
  out.full_kv_bytes = dense_payload_bytes(model, prompt.size());
  return out;
}

DecodeLimits answer_limits(const DecodeOptions& decode) {
  DecodeLimits limits;
  limits.max_new_tokens = decode.max_new_tokens;
  limits.keep_eos = false;  // an answer ends before the end-of-sequence token
  return limits;
}

// Takes each new token into `out`; stops at the answer's line end when the options ask.
std::function<std::string(int)> answer_keeper(const Tokenizer& tokenizer, const DecodeOptions& decode,
                                              SampleOutput& out) {
  return [&tokenizer, &decode, &out](int token) {
    out.tokens.push_back(token);
    const bool line_done = decode.stop_at_newline && ends_answer_line(tokenizer.decode(out.tokens));
    return line_done ? std::string("newline") : std::string();
  };
}

}  // namespace

SampleOutput finish_sample(const LlamaModel& model, const Tokenizer& tokenizer, KVCache& cache,
                           const at::Tensor& logits, const PromptTokens& prompt, const DecodeOptions& decode,
                           const ForwardOptions& options) {
  SampleOutput out = prompt_output(model, cache, prompt);
  out.stop_reason = run_decode_loop(model, cache, logits, answer_limits(decode), options, greedy,
                                    answer_keeper(tokenizer, decode, out));
  out.prediction = tokenizer.decode(out.tokens);
  return out;
}

std::vector<SampleOutput> finish_samples_lockstep(const LlamaModel& model, const Tokenizer& tokenizer,
                                                  const std::vector<KVCache*>& caches,
                                                  const std::vector<at::Tensor>& logits, const PromptTokens& prompt,
                                                  const DecodeOptions& decode,
                                                  const std::vector<ForwardOptions>& options) {
  KVC_CHECK(logits.size() == caches.size() && options.size() == caches.size(),
            "finish_samples_lockstep: {} caches, {} logits, {} options", caches.size(), logits.size(), options.size());
  std::vector<SampleOutput> outputs;
  outputs.reserve(caches.size());  // the keepers hold references into it
  std::vector<LockstepSequence> sequences(caches.size());
  for (size_t i = 0; i < caches.size(); ++i) {
    outputs.push_back(prompt_output(model, *caches[i], prompt));
    sequences[i].cache = caches[i];
    sequences[i].logits = logits[i];
    sequences[i].options = options[i];
    sequences[i].keep = answer_keeper(tokenizer, decode, outputs[i]);
  }
  run_decode_loops_lockstep(model, sequences, answer_limits(decode), greedy);
  for (size_t i = 0; i < caches.size(); ++i) {
    outputs[i].stop_reason = sequences[i].stop_reason;
    outputs[i].prediction = tokenizer.decode(outputs[i].tokens);
  }
  return outputs;
}

SampleOutput run_sample(const LlamaModel& model, const Tokenizer& tokenizer, const CacheSetup& setup,
                        const PromptTokens& prompt, QueryMode mode, const DecodeOptions& decode,
                        const std::string& dump_kept, const std::string& sample_id) {
  KVC_CHECK(!prompt.context.empty(), "empty prompt");
  const auto start = std::chrono::steady_clock::now();
  KVCache cache = setup.new_cache(model);
  std::unique_ptr<ForwardObserver> observer = setup.new_observer();
  const ForwardOptions options{false, observer.get()};
  start_kept_dump(dump_kept, observer.get());

  at::Tensor logits;
  if (mode == QueryMode::Aware || prompt.question.empty()) {
    logits = model.forward(prompt.whole(), cache, options);
  } else {
    model.forward(prompt.context, cache, options);  // compression acts here
    // The budget is the context's: a bounded press must not evict (context or question) for the question.
    if (observer) observer->hold_next_pass();
    logits = model.forward(prompt.question, cache, options);
  }
  SampleOutput out = finish_sample(model, tokenizer, cache, logits, prompt, decode, options);
  finish_kept_dump(dump_kept, observer.get(), cache,
                   {{"sample_id", sample_id},
                    {"query", mode == QueryMode::Aware ? "aware" : "agnostic"},
                    {"context_tokens", std::to_string(prompt.context.size())}});
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace kvc
