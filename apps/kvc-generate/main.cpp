// kvc-generate: text generation with the (optionally compressed) KV cache, streamed to stdout.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <iterator>

#include "compression_options.h"
#include "model_options.h"
#include "retrieval_options.h"
#include "runtime/generation.h"
#include "tool_main.h"
#include "util/build_info.h"
#include "util/files.h"
#include "util/process_stats.h"

namespace {

constexpr const char* kTool = "kvc-generate";
constexpr const char* kExamples = R"(
Examples:
  kvc-generate -m data/models/stories260K -p "Once upon a time" -n 60
  echo "Lily went to the park" | kvc-generate -m data/models/stories260K --temperature 0.8 --seed 7
  kvc-generate -m data/models/stories260K --prompt-file prompt.txt -n 40 --stats-json stats.json
  kvc-generate -m data/models/stories260K -p "Once upon a time" --press h2o --budget 64 -n 10000 --ignore-eos -q
  kvc-generate -m data/models/stories260K -f prompt.txt --press snapkv --ratio 0.5 --budgets profile.safetensors
)";

struct GenerateOptions {
  kvc::cli::ModelOptions model;
  kvc::cli::CompressionOptions compression;
  kvc::cli::RetrievalOptions retrieval;
  std::string prompt, prompt_file, stats_json;
  int64_t max_new_tokens = 128;
  int64_t prompt_tokens = 0;  // > 0: exactly this many prompt tokens (benchmarks at a fixed context)
  kvc::SamplingParams sampling;
  bool no_bos = false, ignore_eos = false, quiet = false;
};

std::string read_prompt(const GenerateOptions& o) {
  KVC_CHECK(o.prompt.empty() || o.prompt_file.empty(), "give either --prompt or --prompt-file, not both");
  if (!o.prompt.empty()) return o.prompt;
  if (!o.prompt_file.empty()) return kvc::read_text_file(o.prompt_file);
  return std::string(std::istreambuf_iterator<char>(std::cin), {});
}

nlohmann::json stats_json(const GenerateOptions& o, const std::vector<int>& prompt, const kvc::GenerationResult& r,
                          const kvc::LlamaModel& model) {
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
          {"seed", o.sampling.seed},
          {"prompt_tokens", s.prompt_tokens},
          {"generated_tokens", s.generated_tokens},
          {"stop_reason", r.stop_reason},
          {"prefill_seconds", s.prefill_seconds},
          {"decode_seconds", s.decode_seconds},
          {"prefill_tokens_per_second", s.prefill_tokens_per_second()},
          {"decode_tokens_per_second", s.decode_tokens_per_second()},
          {"kv_resident_bytes", s.kv_final.resident_bytes},
          {"kv_payload_bytes", s.kv_final.payload_bytes},
          {"kv_peak_resident_bytes", s.kv_peak_resident_bytes},
          {"kv_entries", s.kv_final.entries},
          {"kv_after_prefill_resident_bytes", s.kv_after_prefill.resident_bytes},
          {"peak_rss_bytes", s.peak_rss_bytes},
          {"prompt_ids", prompt},
          {"generated_ids", r.tokens}};
}

int run(GenerateOptions& o) {
  const std::string text = read_prompt(o);
  auto model = o.model.load_model();
  const kvc::Tokenizer tokenizer = o.model.load_tokenizer();
  std::vector<int> prompt;
  if (!o.no_bos) prompt.push_back(model->config().bos_token_id);
  std::vector<int> body = tokenizer.encode(text);
  if (o.prompt_tokens > 0) {
    const auto have = static_cast<int64_t>(body.size()) + (o.no_bos ? 0 : 1);
    KVC_CHECK(have >= o.prompt_tokens, "--prompt-tokens {}: the prompt has only {} tokens", o.prompt_tokens, have);
    body.resize(static_cast<size_t>(o.prompt_tokens - (o.no_bos ? 0 : 1)));
  }
  prompt.insert(prompt.end(), body.begin(), body.end());

  kvc::GenerationRequest request;
  request.prompt = prompt;
  request.max_new_tokens = o.max_new_tokens;
  request.sampling = o.sampling;
  request.stop_at_eos = !o.ignore_eos;

  kvc::CacheSetup setup = kvc::build_cache_setup(o.compression.spec, *model);
  // A bounded cache (eviction while decoding) keeps memory flat, so it may run past the context.
  request.allow_past_context = setup.bounded;
  if (o.retrieval.enabled()) {  // KV cache on storage: RAM stays bounded, so it may run past the context too
    KVC_CHECK(!setup.factory && !setup.make_observer, "--retrieval cannot be combined with --press or --lowrank");
    setup.factory = o.retrieval.factory(*model);
    request.allow_past_context = true;
  }
  kvc::KVCache cache = setup.new_cache(*model);
  auto observer = setup.new_observer();
  kvc::StreamDecoder stream(tokenizer);
  stream.prime(body);
  if (!o.quiet) {
    std::fputs((o.prompt_tokens > 0 ? tokenizer.decode(body) : text).c_str(), stdout);
    std::fflush(stdout);
  }
  const auto result = kvc::generate(*model, cache, request, [&](int id) {
    if (o.quiet || model->config().is_eos(id)) return;
    const std::string piece = stream.push(id);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  }, observer.get());
  if (!o.quiet) std::fputs("\n", stdout);
  const auto& s = result.stats;
  std::fprintf(stderr, "%s: %lld prompt tokens at %.1f tok/s, %lld generated at %.1f tok/s, KV cache %.1f KiB (%s)\n",
               kTool, static_cast<long long>(s.prompt_tokens), s.prefill_tokens_per_second(),
               static_cast<long long>(s.generated_tokens), s.decode_tokens_per_second(),
               s.kv_final.resident_bytes / 1024.0, result.stop_reason.c_str());
  if (o.retrieval.enabled()) std::fprintf(stderr, "%s: %s\n", kTool, o.retrieval.summary().c_str());
  if (result.stop_reason == "context") {
    std::fprintf(stderr, "%s: warning: stopped at the model's context of %lld tokens\n", kTool,
                 static_cast<long long>(model->config().max_position_embeddings));
  }
  if (!o.stats_json.empty()) kvc::write_file_atomic(o.stats_json, stats_json(o, prompt, result, *model).dump(2) + "\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Generate text with a Llama-family model and a (compressed) KV cache.", kTool};
  app.footer(kExamples);
  GenerateOptions o;
  o.compression.add_to(app);
  o.retrieval.add_to(app);
  o.model.add_to(app);
  app.add_option("-p,--prompt", o.prompt, "Prompt text (default: read --prompt-file, else stdin)");
  app.add_option("-f,--prompt-file", o.prompt_file, "File holding the prompt");
  app.add_option("--prompt-tokens", o.prompt_tokens,
                 "Keep exactly the first N prompt tokens, BOS included (error if the prompt is shorter)")
      ->check(CLI::PositiveNumber);
  app.add_option("-n,--max-new-tokens", o.max_new_tokens, "Tokens to generate")->capture_default_str();
  app.add_option("--temperature", o.sampling.temperature, "0 = greedy")->capture_default_str();
  app.add_option("--top-p", o.sampling.top_p, "Nucleus sampling mass")->capture_default_str();
  app.add_option("--seed", o.sampling.seed, "Sampling seed")->capture_default_str();
  app.add_flag("--no-bos", o.no_bos, "Do not prepend the BOS token");
  app.add_flag("--ignore-eos", o.ignore_eos, "Keep generating after EOS");
  app.add_flag("-q,--quiet", o.quiet, "Do not print the text (with --stats-json for benchmarks)");
  app.add_option("--stats-json", o.stats_json,
                 "Write token counts, prefill/decode tokens/s, KV bytes, peak RSS and the token ids here");
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] { return o.compression.handle_listing() ? 0 : run(o); });
}
