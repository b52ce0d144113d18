#include "chat.h"

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <memory>

#include "chat/chat_template.h"
#include "compression/compression_spec.h"
#include "generation/generation.h"
#include "harness/chat_prompt.h"
#include "prompt_escapes.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/files.h"
#include "util/interrupt.h"
#include "util/run_files.h"
#include "util/trim.h"

namespace kvc::generate_app {
namespace {

constexpr const char* kTool = "kvc-generate";

// The user's turns: the prompt (-p or -f) as one, else stdin line by line; a line ending in a
// backslash continues on the next (as llama.cpp's conversation mode reads multi-line input).
class TurnReader {
 public:
  explicit TurnReader(const GenerateOptions& o) {
    KVC_CHECK(o.prompt.empty() || o.prompt_file.empty(), "give either -p/--prompt or -f/--file, not both");
    if (!o.prompt.empty()) fixed_ = o.escape ? process_escapes(o.prompt) : o.prompt;
    if (!o.prompt_file.empty()) fixed_ = read_text_file(o.prompt_file);
    one_shot_ = !o.prompt.empty() || !o.prompt_file.empty();
    prompt_user_ = !one_shot_ && ::isatty(STDIN_FILENO) != 0;
  }

  // The next turn; false at the end of the input.
  bool next(std::string& turn) {
    if (one_shot_) {
      if (done_) return false;
      done_ = true;
      turn = fixed_;
      return true;
    }
    for (;;) {
      if (prompt_user_) std::fprintf(stderr, "> "), std::fflush(stderr);
      turn.clear();
      std::string line;
      bool any = false;
      while (std::getline(std::cin, line)) {
        any = true;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (!line.empty() && line.back() == '\\') {
          turn += line.substr(0, line.size() - 1) + "\n";
          continue;
        }
        turn += line;
        break;
      }
      if (!any) return false;
      if (!trim(turn, " \t\n").empty()) return true;
    }
  }

 private:
  std::string fixed_;
  bool one_shot_ = false, done_ = false, prompt_user_ = false;
};

}  // namespace

void add_chat_flags(CLI::App& app, GenerateOptions& o) {
  app.add_flag("--chat", o.chat,
               "Conversation mode (-cnv): the prompt (-p/-f) is one user turn, or, without one, each line of stdin "
               "is a turn (end a line with \\ to continue it); replies follow the model's chat template and end at "
               "its end of turn; the cache and its compression are kept across turns");
  app.add_option("--system", o.system, "With --chat: the system message (-sys)");
  app.add_option("--chat-template", o.chat_template,
                 "With --chat: a template name (" + fmt::format("{}", fmt::join(builtin_chat_template_names(), ", ")) +
                     ") or a Jinja file, instead of the model's own (GGUF tokenizer.chat_template, "
                     "tokenizer_config.json's chat_template)");
}

cli::AliasList chat_aliases() { return {{"-cnv", "--chat"}, {"-sys", "--system"}}; }

int run_chat(const GenerateOptions& o) {
  KVC_CHECK(o.prompt_tokens == 0, "--prompt-tokens cuts a prompt's tokens; a --chat prompt is a rendered conversation");
  KVC_CHECK(o.compression.dump_kept.empty(), "--dump-kept records one prompt; it does not take --chat");
  if (!o.json_out.empty()) claim_writable_output(o.json_out);
  TurnReader turns(o);
  auto model = o.model.load_model();
  const Tokenizer tokenizer = o.model.load_tokenizer();
  ChatFormat format{std::make_shared<const ChatTemplate>(resolve_chat_template(o.chat_template, o.model.model_dir)),
                    o.system};
  ChatSession session(format, tokenizer, o.model.bos);
  CacheSetup setup = build_cache_setup(o.compression.spec, *model);
  const int64_t model_context = model->config().max_position_embeddings;
  KVC_CHECK(o.ctx_size <= model_context || setup.bounded,
            "-c/--ctx-size {} is above the model's context of {} tokens; lower it", o.ctx_size, model_context);
  const int64_t context = o.ctx_size > 0 ? o.ctx_size : model_context;
  KVCache cache = setup.new_cache(*model);
  auto observer = setup.new_observer();

  const bool show_text = !o.quiet && !o.json;
  std::vector<int> conversation;  // the ids the cache was fed, in order: the repeat penalty's context
  nlohmann::json turn_records = nlohmann::json::array();
  int64_t prompt_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  std::string stop_reason = "end_of_input";
  std::string message;
  while (turns.next(message)) {
    const std::vector<int> ids = session.user_turn(message);
    const int64_t held = cache.next_position(), fed = static_cast<int64_t>(ids.size());
    KVC_CHECK(
        held + fed<context,
                   "the conversation reaches {} tokens with this turn, at or over the {} of {} tokens; start a new "
                   "conversation{}",
                   held + fed, o.ctx_size> 0
            ? "-c/--ctx-size"
            : "model's context",
        context, o.ctx_size > 0 ? " or raise -c" : "");
    conversation.insert(conversation.end(), ids.begin(), ids.end());
    GenerationRequest request;
    request.prompt = ids;
    request.max_new_tokens =
        o.max_new_tokens >= 0 ? std::min(o.max_new_tokens, context - held - fed) : context - held - fed;
    request.sampling = o.sampling;
    request.sampling.penalty_context = conversation;
    request.stop_at_eos = !o.ignore_eos;
    request.allow_past_context = setup.bounded;
    StreamDecoder stream(tokenizer);
    stream.prime(ids);
    std::vector<int> reply_ids;
    // Each turn is a prompt: a prompt-time press compresses it too (a bounded one evicts on every pass).
    if (observer) observer->next_pass_is_prompt();
    const GenerationResult result = generate(
        *model, cache, request,
        [&](int id) {
          if (model->config().is_eos(id)) return;
          reply_ids.push_back(id);
          const std::string piece = stream.push(id);
          if (show_text && !piece.empty()) std::fwrite(piece.data(), 1, piece.size(), stdout), std::fflush(stdout);
        },
        observer.get());
    if (show_text) std::fputc('\n', stdout), std::fflush(stdout);
    // The end of turn that stopped the reply is not in the cache: the next turn feeds it.
    const bool stopped = result.stop_reason == "eos" && !result.tokens.empty();
    conversation.insert(conversation.end(), result.tokens.begin(), result.tokens.end() - (stopped ? 1 : 0));
    const std::string reply = tokenizer.decode(reply_ids);
    session.assistant_turn(reply);
    const GenerationStats& s = result.stats;
    prompt_tokens += s.prompt_tokens;
    generated_tokens += s.generated_tokens;
    prefill_seconds += s.prefill_seconds;
    decode_seconds += s.decode_seconds;
    turn_records.push_back({{"user", message},
                            {"reply", reply},
                            {"prompt_tokens", s.prompt_tokens},
                            {"generated_tokens", s.generated_tokens},
                            {"stop_reason", result.stop_reason},
                            {"prefill_tokens_per_second", s.prefill_tokens_per_second()},
                            {"decode_tokens_per_second", s.decode_tokens_per_second()},
                            {"kv_entries", s.kv_final.entries},
                            {"kv_resident_bytes", s.kv_final.resident_bytes},
                            {"kv_payload_bytes", s.kv_final.payload_bytes}});
    stop_reason = result.stop_reason;
    if (result.stop_reason == "interrupted" || interrupted()) {
      stop_reason = "interrupted";
      break;
    }
  }
  const CacheFootprint footprint = cache.footprint();
  std::fprintf(stderr,
               "%s: %zu turn(s), %lld prompt tokens fed in %.2f s, %lld generated in %.2f s, %lld positions in the "
               "conversation, KV cache %.1f KiB resident (%s)\n",
               kTool, turn_records.size(), static_cast<long long>(prompt_tokens), prefill_seconds,
               static_cast<long long>(generated_tokens), decode_seconds, static_cast<long long>(cache.next_position()),
               footprint.resident_bytes / 1024.0, format.chat_template->origin().c_str());
  if (setup.report) std::fprintf(stderr, "%s: %s\n", kTool, setup.report().c_str());
  nlohmann::json stats = {{"tool", kTool},
                          {"version", build_version()},
                          {"commit", build_commit()},
                          {"model", o.model.model_dir},
                          {"compression", o.compression.spec.describe()},
                          {"chat_template", format.chat_template->origin()},
                          {"system", o.system},
                          {"threads", at::get_num_threads()},
                          {"temperature", o.sampling.temperature},
                          {"seed", o.sampling.seed},
                          {"turns", turn_records},
                          {"prompt_tokens", prompt_tokens},
                          {"generated_tokens", generated_tokens},
                          {"positions", cache.next_position()},
                          {"stop_reason", stop_reason},
                          {"kv_resident_bytes", footprint.resident_bytes},
                          {"kv_payload_bytes", footprint.payload_bytes},
                          {"kv_entries", footprint.entries},
                          {"ids", conversation}};
  if (setup.report_json) stats["cache_report"] = setup.report_json();
  if (!o.json_out.empty()) write_file_atomic(o.json_out, stats.dump(2) + "\n");
  if (o.json) std::printf("%s\n", stats.dump().c_str());
  return stop_reason == "interrupted" ? 130 : 0;
}

}  // namespace kvc::generate_app
