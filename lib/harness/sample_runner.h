#pragma once
// Running one evaluation sample through a model with a CacheSetup, in the two protocols of the
// compression literature:
//   query-aware    — context and question are prefilled together, so compression sees the question;
//   query-agnostic — the context is prefilled alone (compression acts there), then the question is fed
//                    as a second forward pass, so the kept entries cannot depend on the question.
// Both then decode greedily. One observer sees every forward pass of the sample, as in generate(): a
// press compresses at its first (prefill) forward and, if bounded, keeps evicting while tokens follow.
#include <string>
#include <vector>

#include "harness/chat_prompt.h"
#include "model/cache_setup.h"
#include "model/llama_model.h"
#include "tokenizer/tokenizer.h"

namespace kvc {

enum class QueryMode { Aware, Agnostic };
// "aware" | "agnostic"; throws kvc::Error naming the flag otherwise.
QueryMode parse_query_mode(const std::string& text);

enum class Truncation { Middle, Refuse };
// "middle" | "refuse"; throws kvc::Error naming the flag otherwise.
Truncation parse_truncation(const std::string& text);

// Token ids of a prompt split at the end of its context part. The context part starts with BOS.
struct PromptTokens {
  std::vector<int> context;
  std::vector<int> question;
  int64_t dropped = 0;  // prompt tokens removed from the middle to fit the limit
  int64_t size() const { return static_cast<int64_t>(context.size() + question.size()); }
  std::vector<int> whole() const {
    std::vector<int> all = context;
    all.insert(all.end(), question.begin(), question.end());
    return all;
  }
};

// [BOS] + encode(context_part) and encode(question_part), encoded separately so that both query modes
// feed the very same tokens. A prompt longer than `max_prompt_tokens` (LongBench's max_length; 0: the
// model's context less `max_new_tokens`) is refused (Truncation::Refuse: kvc::Error naming `sample_id`
// and --truncate) or, with Truncation::Middle, cut as LongBench's pred.py cuts it: the first and last
// max_prompt_tokens / 2 tokens of the whole prompt are kept (so a question longer than that half loses
// its start), with a warning on stderr. LongBench then decodes the kept tokens and encodes the text
// again; kvc keeps the token ids, which differ from that only where the cut joins two pieces.
// With `chat` (--chat), the prompt is one user turn of the model's chat template, context then question,
// with the assistant's turn opened, as LongBench's pred.py wraps a chat model's prompt: the context part
// is the template's opening and the context, the question part the question, the end of the turn and
// the assistant header (chat_prompt.h).
PromptTokens tokenize_prompt(const Tokenizer& tokenizer, const LlamaModel& model, const std::string& context_part,
                             const std::string& question_part, int64_t max_new_tokens, Truncation truncation,
                             const std::string& sample_id, int64_t max_prompt_tokens = 0,
                             BosChoice bos = BosChoice::FromFile, const ChatFormat* chat = nullptr);

// LongBench's middle cut of a prompt longer than `max_tokens`: its first and last max_tokens / 2 tokens
// (context and question taken as one sequence) are kept; `dropped` counts the rest.
PromptTokens cut_prompt_middle(const PromptTokens& prompt, int64_t max_tokens);

struct SampleOutput {
  std::string prediction;
  std::vector<int> tokens;
  int64_t prompt_tokens = 0;
  int64_t kv_payload_bytes = 0;  // cache payload after the prompt (context + question) was fed
  int64_t kv_ram_bytes = 0;      // of the cache, what RAM holds (CacheFootprint::ram_bytes)
  int64_t full_kv_bytes = 0;     // what the uncompressed dense cache would hold for the same tokens
  double seconds = 0;
  std::string stop_reason;  // eos | newline | max_new_tokens | context
  double compression_ratio() const {
    return full_kv_bytes > 0 ? 1.0 - static_cast<double>(kv_payload_bytes) / full_kv_bytes : 0.0;
  }
  // The same against the RAM the cache holds: differs from compression_ratio for a cache on storage.
  double ram_ratio() const { return full_kv_bytes > 0 ? 1.0 - static_cast<double>(kv_ram_bytes) / full_kv_bytes : 0.0; }
};

struct DecodeOptions {
  int64_t max_new_tokens = 16;
  bool stop_at_newline = true;  // stop once the answer has text and a line break follows it
};

// `dump_kept`, when not empty, receives what the compression kept (kept_dump.h); `sample_id` goes into its header.
SampleOutput run_sample(const LlamaModel& model, const Tokenizer& tokenizer, const CacheSetup& setup,
                        const PromptTokens& prompt, QueryMode mode, const DecodeOptions& decode,
                        const std::string& dump_kept = {}, const std::string& sample_id = {});

// The part of a sample after its prompt was fed: `logits` are the prompt's last, `cache` holds the prompt
// (compressed as it was fed). Greedy decoding, the cache's bytes, and the prediction; seconds left 0.
SampleOutput finish_sample(const LlamaModel& model, const Tokenizer& tokenizer, KVCache& cache,
                           const at::Tensor& logits, const PromptTokens& prompt, const DecodeOptions& decode,
                           const ForwardOptions& options);

// One prompt's part after the prompt for several caches at once (each with its prompt's last logits and
// its options), their decoding in lockstep (generation/lockstep_decode.h): output i equals
// finish_sample(model, tokenizer, *caches[i], logits[i], prompt, decode, options[i]).
std::vector<SampleOutput> finish_samples_lockstep(const LlamaModel& model, const Tokenizer& tokenizer,
                                                  const std::vector<KVCache*>& caches,
                                                  const std::vector<at::Tensor>& logits, const PromptTokens& prompt,
                                                  const DecodeOptions& decode,
                                                  const std::vector<ForwardOptions>& options);

}  // namespace kvc
