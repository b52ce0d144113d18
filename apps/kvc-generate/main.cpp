// kvc-generate: text generation with the (optionally compressed) KV cache, streamed to stdout.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <limits>

#include "bench/hardware_limits.h"
#include "chat.h"
#include "compression_options.h"
#include "flag_vocabulary.h"
#include "generate_options.h"
#include "generation/generation.h"
#include "model_options.h"
#include "press/kept_dump.h"
#include "prompt_escapes.h"
#include "tool_main.h"
#include "util/build_info.h"
#include "util/files.h"
#include "util/process_stats.h"
#include "util/run_files.h"

namespace {

using kvc::generate_app::GenerateOptions;
constexpr const char* kTool = "kvc-generate";
constexpr const char* kExamples = R"(
Sampling follows llama.cpp: --repeat-penalty over the last --repeat-last-n tokens, then greedy at
--temp 0, else temperature, --top-k, --top-p and --min-p, drawn from --seed.

Examples:
  kvc-generate -m data/models/stories260K -p "Once upon a time" -n 60
  kvc-generate -m data/models/stories260K -p "Lily went to the park" --temp 0.8 --top-k 40 --min-p 0.05 -s 7 -n 40
  kvc-generate -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt --prompt-tokens 200 -n 40 --json-out stats.json
  kvc-generate -m data/models/stories260K -p "Once upon a time" -n 20 --json
  kvc-generate -m data/models/stories260K -p "Once upon a time" --press h2o --budget 64 -n 2000 --ignore-eos -q
  kvc-generate -m data/models/stories260K -p "Once upon a time" --press snapkv --ratio 0.5 -n 40 --repeat-penalty 1.1
  kvc-generate -m $(scripts/model_path.sh smollm2-135m) --chat -p "What is the capital of Germany?" -n 40
  printf 'What is the capital of Germany?\nAnd of Italy?\n' | kvc-generate -m $(scripts/model_path.sh smollm2-135m) -cnv -n 40
)";

std::string read_prompt(const GenerateOptions& o) {
  KVC_CHECK(o.prompt.empty() || o.prompt_file.empty(), "give either -p/--prompt or -f/--file, not both");
  if (!o.prompt.empty()) return o.escape ? kvc::generate_app::process_escapes(o.prompt) : o.prompt;
  if (!o.prompt_file.empty()) return kvc::read_text_file(o.prompt_file);
  return std::string(std::istreambuf_iterator<char>(std::cin), {});
}

nlohmann::json stats_json(const GenerateOptions& o, const std::vector<int>& prompt, const kvc::GenerationResult& r,
                          const kvc::LlamaModel& model, const std::string& text) {
  const auto& s = r.stats;
  return {{"tool", kTool},
          {"version", kvc::build_version()},
          {"commit", kvc::build_commit()},
          {"model", o.model.model_dir},
          {"model_config_hash", model.config().config_hash},
          {"device", o.model.device},
          {"compression", o.compression.spec.describe()},
          {"threads", at::get_num_threads()},
          {"temperature", o.sampling.temperature},
          {"top_p", o.sampling.top_p},
          {"top_k", o.sampling.top_k},
          {"min_p", o.sampling.min_p},
          {"repeat_penalty", o.sampling.repeat_penalty},
          {"repeat_last_n", o.sampling.repeat_last_n},
          {"seed", o.sampling.seed},
          {"ctx_size", o.ctx_size},
          {"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"stop_reason", r.stop_reason},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"prefill_tokens_per_second", s.prefill_tokens_per_second()},
          {"decode_tokens_per_second", s.decode_tokens_per_second()},
          {"kv_resident_bytes", s.kv_final.resident_bytes},
          {"kv_payload_bytes", s.kv_final.payload_bytes},
          {"kv_window_payload_bytes", s.kv_final.window_payload_bytes},
          {"kv_step_read_bytes", s.kv_final.step_read_bytes},
          {"weight_bytes", model.weight_bytes()},
          {"weight_format", model.weight_format()},
          {"kv_peak_resident_bytes", s.kv_peak_resident_bytes},
          {"kv_entries", s.kv_final.entries},
          {"kv_after_prefill_resident_bytes", s.kv_after_prefill.resident_bytes},
          {"peak_rss_bytes", s.peak_rss_bytes},
          {"prompt_ids", prompt},
          {"generated_ids", r.tokens},
          {"text", text}};
}

// Flags that would silently do nothing: sampling filters at temperature 0, a store without --retrieval.
void check_flags(const GenerateOptions& o, const std::vector<const CLI::Option*>& sampling_filters) {
  kvc::validate_sampling(o.sampling);
  kvc::check_flag_combination(o.compression.spec);
  KVC_CHECK(!(o.json && o.json_out == "-"), "--json and --json-out - would both print the JSON on stdout; keep one");
  KVC_CHECK(o.ctx_size >= 0, "-c/--ctx-size must be >= 0 (0 = the model's context), got {}", o.ctx_size);
  KVC_CHECK(o.chat || (o.system.empty() && o.chat_template.empty()),
            "--system and --chat-template shape a conversation; add --chat (-cnv)");
  std::string ignored;
  for (const CLI::Option* opt : sampling_filters)
    if (opt->count() > 0) ignored += (ignored.empty() ? "--" : ", --") + opt->get_lnames().front();
  if (o.sampling.temperature == 0 && !ignored.empty())
    std::fprintf(stderr, "%s: warning: %s ignored at --temp 0 (greedy); give --temp > 0 to sample\n", kTool,
                 ignored.c_str());
}

int run(GenerateOptions& o) {
  if (!o.json_out.empty()) kvc::claim_writable_output(o.json_out);  // a typo must not cost the whole run
  if (!o.compression.spec.retrieval_store.empty()) kvc::claim_writable_output(o.compression.spec.retrieval_store);
  const std::string text = read_prompt(o);
  auto model = o.model.load_model();
  const kvc::Tokenizer tokenizer = o.model.load_tokenizer();
  std::vector<int> prompt = tokenizer.encode_prompt(text, o.model.bos);
  const size_t prefix = tokenizer.prompt_prefix(o.model.bos).size();
  if (o.prompt_tokens > 0) {
    const auto have = static_cast<int64_t>(prompt.size());
    KVC_CHECK(have >= o.prompt_tokens, "--prompt-tokens {}: the prompt has only {} tokens", o.prompt_tokens, have);
    prompt.resize(static_cast<size_t>(o.prompt_tokens));
  }
  // The prompt's text tokens (after BOS; a --prompt-tokens cut may leave fewer).
  const std::vector<int> body(prompt.begin() + static_cast<std::ptrdiff_t>(std::min(prefix, prompt.size())),
                              prompt.end());

  kvc::GenerationRequest request;
  request.prompt = prompt;
  // -1 (llama.cpp's "no limit"): until the end of generation, or the context: -c, else the model's.
  const int64_t context_limit = o.ctx_size > 0 ? o.ctx_size : model->config().max_position_embeddings;
  request.max_new_tokens = o.max_new_tokens >= 0
                               ? o.max_new_tokens
                               : std::max<int64_t>(0, context_limit - static_cast<int64_t>(prompt.size()));
  request.sampling = o.sampling;
  request.sampling.penalty_context = prompt;
  request.stop_at_eos = !o.ignore_eos;
  request.count_ops = o.count_ops;

  kvc::CacheSetup setup = kvc::build_cache_setup(o.compression.spec, *model);
  // A bounded cache (eviction while decoding, or the cache on storage) keeps RAM flat, so it may run past
  // the context.
  request.allow_past_context = setup.bounded;
  if (o.ctx_size > 0) {
    const int64_t context = model->config().max_position_embeddings;
    KVC_CHECK(o.ctx_size <= context || request.allow_past_context,
              "-c/--ctx-size {} is above the model's context of {} tokens; lower it, or add a bounded compression "
              "(e.g. --press h2o --budget 64) that keeps memory flat past the context",
              o.ctx_size, context);
    const auto prompt_size = static_cast<int64_t>(prompt.size());
    KVC_CHECK(prompt_size < o.ctx_size,
              "-c/--ctx-size {}: the prompt alone has {} tokens; raise -c or shorten the prompt", o.ctx_size,
              prompt_size);
    request.max_new_tokens = std::min(request.max_new_tokens, o.ctx_size - prompt_size);
  }
  kvc::KVCache cache = setup.new_cache(*model);
  auto observer = setup.new_observer();
  kvc::start_kept_dump(o.compression.dump_kept, observer.get());
  kvc::StreamDecoder stream(tokenizer);
  stream.prime(body);
  const bool show_text = !o.quiet && !o.json;  // --json keeps stdout for the one JSON object
  std::string generated;
  char last_printed = '\n';
  const auto print = [&](const std::string& piece) {
    if (!show_text || piece.empty()) return;
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    last_printed = piece.back();
  };
  // The prompt's text is printed once prefill is over: a long prefill's progress line (stderr) has the
  // terminal's last line to itself until then.
  bool prompt_printed = false;
  const auto print_prompt = [&] {
    if (!prompt_printed) print(o.prompt_tokens > 0 ? tokenizer.decode(body) : text);
    prompt_printed = true;
  };
  request.show_prefill_progress = !o.quiet;
  // The cap that ends the run when it is the context's (-c, or -n -1), not the -n the user asked for.
  const bool capped_by_context = o.max_new_tokens < 0 || request.max_new_tokens < o.max_new_tokens;
  auto result = kvc::generate(
      *model, cache, request,
      [&](int id) {
        print_prompt();
        if (model->config().is_eos(id)) return;
        const std::string piece = stream.push(id);
        generated += piece;
        print(piece);
      },
      observer.get());
  print_prompt();
  if (result.stop_reason == "max_new_tokens" && capped_by_context) result.stop_reason = "context";
  kvc::finish_kept_dump(o.compression.dump_kept, observer.get(), cache,
                        {{"press", o.compression.spec.press},
                         {"ratio", std::to_string(o.compression.spec.ratio)},
                         {"budget", std::to_string(o.compression.spec.budget)}});
  // The text ends its line before the summary on stderr, also when both go to one terminal or pipe.
  if (last_printed != '\n') print("\n");
  const auto& s = result.stats;
  // The first new token comes from the prefill's logits: a rate needs at least one decode step after it.
  const std::string decode_rate = s.generated_tokens > 1 ? fmt::format("at {:.1f} tok/s", s.decode_tokens_per_second())
                                                         : std::string("from the prefill");
  std::fprintf(stderr,
               "%s: %lld prompt tokens at %.1f tok/s, %lld generated %s, KV cache %.1f KiB resident at the "
               "end (after prefill: %.1f KiB, peak %.1f KiB) (%s)\n",
               kTool, static_cast<long long>(s.prompt_tokens), s.prefill_tokens_per_second(),
               static_cast<long long>(s.generated_tokens), decode_rate.c_str(), s.kv_final.resident_bytes / 1024.0,
               s.kv_after_prefill.resident_bytes / 1024.0, s.kv_peak_resident_bytes / 1024.0,
               result.stop_reason.c_str());
  if (s.kv_final.window_payload_bytes > 0) {
    const int64_t window = s.kv_final.window_payload_bytes, global = s.kv_final.payload_bytes - window;
    std::fprintf(stderr, "%s: KV payload %.1f KiB: %.1f KiB in global layers, %.1f KiB in sliding-window layers\n",
                 kTool, s.kv_final.payload_bytes / 1024.0, global / 1024.0, window / 1024.0);
  }
  if (setup.report) std::fprintf(stderr, "%s: %s\n", kTool, setup.report().c_str());
  if (result.stop_reason == "context") {
    std::fprintf(stderr, "%s: warning: stopped at the %s of %lld tokens\n", kTool,
                 o.ctx_size > 0 ? "-c/--ctx-size" : "model's context",
                 static_cast<long long>(o.ctx_size > 0 ? o.ctx_size : model->config().max_position_embeddings));
  }
  nlohmann::json stats = stats_json(o, prompt, result, *model, generated);
  if (o.count_ops) {
    stats["decode_aten_ops_per_step"] = result.stats.decode_aten_ops_per_step();
    nlohmann::json by_name = nlohmann::json::object();
    for (const auto& [name, calls] : result.stats.decode_aten_ops_by_name)
      by_name[name] = result.stats.per_decode_step(calls);
    stats["decode_aten_ops_per_step_by_name"] = by_name;
  }
  if (setup.report_json) stats["cache_report"] = setup.report_json();
  if ((!o.json_out.empty() || o.json) && model->device().is_cpu()) {
    // What a decode step must stream at the end (weights and the cache as it is then), and the speed
    // that stream allows at the read bandwidth of the model's own weights, measured after the run.
    const double step_bytes = static_cast<double>(model->weight_bytes() + s.kv_final.step_read_bytes);
    const double bandwidth = kvc::measure_read_bandwidth(model->decode_weights(), 3);
    stats["decode_step_bytes"] = step_bytes;
    stats["weights_read_bandwidth_bytes_per_second"] = bandwidth;
    stats["decode_bound_tokens_per_second"] = bandwidth > 0 ? bandwidth / step_bytes : 0.0;
  }
  if (!o.json_out.empty()) kvc::write_file_atomic(o.json_out, stats.dump(2) + "\n");
  if (o.json) std::printf("%s\n", stats.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate text with a Llama-family model and a (compressed) KV cache.", kTool};
  app.footer(kExamples);
  GenerateOptions o;
  o.compression.add_to(app);
  o.compression.add_dump_kept_to(app);
  o.compression.add_retrieval_store_to(app);
  o.model.add_to(app);
  o.model.add_bos_flags_to(app);
  app.add_option("-p,--prompt", o.prompt, "Prompt text (default: read -f/--file, else stdin)");
  app.add_flag("-e,--escape", o.escape, "Read \\n, \\t, \\\\, \\\", \\xHH ... in -p as llama.cpp's -e does");
  kvc::cli::add_text_file(app, o.prompt_file, "File holding the prompt");
  app.add_option("--prompt-tokens", o.prompt_tokens,
                 "Keep exactly the first N prompt tokens, BOS included (error if the prompt is shorter)")
      ->check(kvc::cli::positive_count());
  app.add_option("-n,--max-new-tokens", o.max_new_tokens,
                 "Tokens to generate; -1: until the end of generation or a full context (-c, else the model's)")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{-1}, std::numeric_limits<int64_t>::max()).description("").name("-1 or more"));
  kvc::cli::add_ctx_size(app, o.ctx_size,
                         "Limit on prompt + generated tokens (0 = the model's context; above it only with a bounded "
                         "compression)");
  app.add_option("--temp,--temperature", o.sampling.temperature, "Sampling temperature, 0 = greedy")
      ->capture_default_str();
  std::vector<const CLI::Option*> filters;
  filters.push_back(
      app.add_option("--top-k", o.sampling.top_k, "Keep the K most probable tokens (0 = off)")->capture_default_str());
  filters.push_back(app.add_option("--top-p", o.sampling.top_p, "Nucleus: smallest set reaching this probability mass")
                        ->capture_default_str());
  filters.push_back(app.add_option("--min-p", o.sampling.min_p,
                                   "Drop tokens below this fraction of the top token's probability (0 = off)")
                        ->capture_default_str());
  app.add_option("--repeat-penalty", o.sampling.repeat_penalty,
                 "Divide positive / multiply negative logits of recent tokens (1 = off)")
      ->capture_default_str();
  app.add_option("--repeat-last-n", o.sampling.repeat_last_n, "Tokens --repeat-penalty looks back over (-1 = all)")
      ->capture_default_str();
  app.add_option("-s,--seed", o.sampling.seed, "Sampling seed")->capture_default_str();
  app.add_flag("--ignore-eos", o.ignore_eos, "Keep generating after EOS");
  kvc::generate_app::add_chat_flags(app, o);
  app.add_flag("-q,--quiet", o.quiet, "Do not print the text or progress lines (with --json-out for benchmarks)");
  app.add_flag("--count-ops", o.count_ops,
               "Report the ATen operator calls per decode step (decode_aten_ops_per_step in the JSON, by "
               "operator name in decode_aten_ops_per_step_by_name): the "
               "framework overhead a compression adds per step, independent of machine load. Counting slows each "
               "call a little: leave it off for timed runs");
  kvc::cli::add_json_switch(app, o.json,
                            "Print token counts, tokens/s, KV bytes, the token ids and the text as one JSON object "
                            "on stdout (instead of the text)");
  kvc::cli::add_json_out(app, o.json_out,
                         "Write token counts, prefill/decode tokens/s, KV bytes, peak RSS and the token ids here");
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool, kvc::generate_app::chat_aliases()); code >= 0)
    return code;
  return kvc::cli::run_tool(kTool, [&] {
    check_flags(o, filters);
    if (o.chat) return kvc::generate_app::run_chat(o);
    return run(o);
  });
}
