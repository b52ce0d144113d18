// kvc-eval kl: KL divergence and top-1 agreement of a compressed cache against the exact model.
#include <algorithm>
#include <cstdio>

#include "compression_options.h"
#include "eval/kl_divergence.h"
#include "eval_common.h"
#include "flag_vocabulary.h"
#include "subcommands.h"
#include "task_command.h"

namespace kvc::eval_app {

namespace {

struct KlCommandOptions : TaskCommandOptions {
  std::string file;
  KlOptions kl;
};

int run_kl(KlCommandOptions& o) {
  const TaskRun loaded(o);
  const LlamaModel& model = *loaded.model;
  const CacheSetup& setup = loaded.setup;
  // Block products round every input to 8 bits, so any change upstream (a cache type, an eviction)
  // re-rolls that rounding in every later layer: the KL measured then carries the rounding's own noise.
  if (model.has_block_weights())
    std::fprintf(stderr,
                 "note: the weights are in GGUF blocks, whose products round their inputs to 8 bits; the KL below "
                 "includes that rounding's noise (3.1e-3 nats for an f16 cache on SmolLM2-135M Q4_1); "
                 "--dtype float32 measures the compression alone\n");
  const KlResult r = evaluate_kl(model, loaded.tokenize_file(o.file), o.kl, setup, !o.json);
  nlohmann::json out = {{"method", setup.name},
                        {"kl", r.mean_kl},
                        {"max_kl", r.max_kl},
                        {"top1_agreement", r.top1_agreement},
                        {"tokens_scored", r.tokens_scored},
                        {"windows", r.windows},
                        {"windows_planned", r.windows_planned},
                        {"complete", !r.stopped},
                        {"ppl_reference", r.ppl_reference},
                        {"ppl_compressed", r.ppl_compressed},
                        {"compression_ratio", r.compression_ratio()},
                        {"reference_kv_bytes", r.reference_kv_bytes},
                        {"compressed_kv_bytes", r.compressed_kv_bytes},
                        {"reference_window_kv_bytes", r.reference_window_kv_bytes},
                        {"compressed_window_kv_bytes", r.compressed_window_kv_bytes},
                        {"compressed_ram_bytes", r.compressed_ram_bytes},
                        {"ram_ratio", r.ram_ratio()},
                        {"window", o.kl.plan.window},
                        {"context_fraction", o.kl.context_fraction},
                        {"chunk", o.kl.chunk},
                        {"weights", model.weight_format()},
                        {"seconds", r.seconds},
                        {"metadata", run_metadata(o.model, model, o.file)}};
  if (r.stopped) say_windows_scored_before_interrupt(r.windows, r.windows_planned);
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
    return task_exit_code();
  }
  std::printf(
      "%s: KL %.6g (max %.4g), top-1 agreement %.4f over %lld tokens; ppl %.4f vs %.4f exact; "
      "compression %.1f%%\n",
      setup.name.c_str(), r.mean_kl, r.max_kl, r.top1_agreement, static_cast<long long>(r.tokens_scored),
      r.ppl_compressed, r.ppl_reference, 100 * r.compression_ratio());
  if (r.compressed_ram_bytes != r.compressed_kv_bytes)
    std::printf("  RAM held: %.1f%% less than the uncompressed cache (the rest of the cache is on storage)\n",
                100 * r.ram_ratio());
  if (r.reference_window_kv_bytes > 0) {
    const auto global = [](int64_t all, int64_t window) { return static_cast<double>(all - window); };
    std::printf("  of the global layers' cache: %.1f%% removed (sliding-window layers keep their window: %.1f KiB)\n",
                100 * (1 - global(r.compressed_kv_bytes, r.compressed_window_kv_bytes) /
                               global(r.reference_kv_bytes, r.reference_window_kv_bytes)),
                r.compressed_window_kv_bytes / 1024.0 / std::max<int64_t>(r.windows, 1));
  }
  return task_exit_code();
}

}  // namespace

void add_kl_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<KlCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "kl", "KL divergence and top-1 agreement of a compressed run vs the exact model on the same windows");
  cmd->footer(
      "\nEach window's first --context-fraction is prefilled (compression acts there); the rest is decoded\n"
      "--chunk tokens at a time and its next-token distributions are compared.\n\nExamples:\n"
      "  kvc-eval kl -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt "
      "-c 256 --max-windows 8 --json\n"
      "  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw -c 256 --max-windows 4 "
      "--press snapkv --ratio 0.5\n"
      "  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw -c 256 --max-windows 2 "
      "--retrieval adaptive:budget=64\n");
  o->add_model_to(*cmd);
  o->compression.add_to(*cmd);
  cli::add_text_file(*cmd, o->file, "UTF-8 text file")->required();
  o->kl.plan.max_windows = 8;
  cli::add_ctx_size(*cmd, o->kl.plan.window, "Window length in tokens")->capture_default_str();
  cmd->add_option("--max-windows", o->kl.plan.max_windows, "Windows to evaluate (0 = all)")->capture_default_str();
  cmd->add_option("--context-fraction", o->kl.context_fraction, "Share of each window prefilled")
      ->capture_default_str();
  cmd->add_option("--chunk", o->kl.chunk,
                  "Tokens per decoding step after the prefill (1 with --retrieval, which picks entries per token)")
      ->capture_default_str();
  cli::add_json_switch(*cmd, o->json);
  on_run(cmd, o, action, run_kl);
}

}  // namespace kvc::eval_app
