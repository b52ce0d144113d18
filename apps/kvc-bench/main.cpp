// kvc-bench: prefill and decode throughput at several context lengths, against this machine's
// measured limits (memory bandwidth for decode, fp32 GEMM peak for prefill), in one run.
#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include "bench/hardware_limits.h"
#include "bench/median.h"
#include "block_kernel_bench.h"
#include "cache/kv_cache.h"
#include "flag_vocabulary.h"
#include "instruction_counting.h"
#include "model_options.h"
#include "press_comparison.h"
#include "tool_main.h"
#include "util/build_info.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/process_stats.h"
#include "util/run_files.h"

namespace {

constexpr const char* kTool = "kvc-bench";

// Useful FLOPs of a prefill of n tokens: every weight multiply-add once per token, causal attention
// (QK^T and PV over n(n+1)/2 pairs), logits for the last token only.
double prefill_flops(const kvc::ModelConfig& c, int64_t linear_params, int64_t n) {
  const double attention = 2.0 * 2.0 * c.num_layers * c.num_heads * c.head_dim * (n * (n + 1) / 2.0);
  return 2.0 * static_cast<double>(linear_params) * n + attention + 2.0 * c.hidden_size * c.vocab_size;
}

std::vector<int> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> pick(3, static_cast<int>(vocab - 1));
  std::vector<int> ids(static_cast<size_t>(n));
  for (auto& id : ids) id = pick(rng);
  return ids;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Benchmark prefill and decode against the machine's bandwidth and GEMM limits.", kTool};
  app.footer(R"(
The README's table uses a 134M-parameter random Llama from kvc-make-checkpoint --preset llama-125m
(recipes/bench_cpu.sh).

With --presses, it compares the decode speed of eviction methods instead: the first context's prompt
goes into a cache per press, then each decode step runs in every cache in turn, so a drift in the
machine's memory bandwidth slows all of them alike (recipes/eviction_decode_interleaved.sh).

Examples:
  kvc-bench -m data/models/stories260K --contexts 128,256 --decode-tokens 16 --json-out bench.json
  kvc-bench -m data/models/kvc-micro-lm --contexts 512 --json
  kvc-bench -m data/models/stories260K --contexts 200 --decode-tokens 50 --presses none,streaming_llm,h2o --ratio 0.5
)");
  kvc::cli::ModelOptions model_options;
  model_options.add_to(app);
  std::vector<int64_t> contexts{512, 2048, 8192};
  int64_t decode_tokens = 32;
  int decode_repeats = 3;
  int prefill_repeats = 1;
  std::string json_path;
  bool json = false;
  std::vector<std::string> presses;
  double ratio = 0.9;
  bool block_kernels = false;
  app.add_option("--contexts", contexts, "Prompt lengths to measure")
      ->delimiter(',')
      ->capture_default_str()
      ->check(kvc::cli::positive_count());
  app.add_option("--decode-tokens", decode_tokens, "Decode steps per timed run after each prefill")
      ->capture_default_str()
      ->check(kvc::cli::positive_count());
  app.add_option("--decode-repeats", decode_repeats,
                 "Timed decode runs per context; the best is reported, as for the machine limits")
      ->capture_default_str()
      ->check(kvc::cli::positive_count());
  app.add_option("--prefill-repeats", prefill_repeats,
                 "Timed prefills per context (each into a fresh cache); the best is reported")
      ->capture_default_str()
      ->check(kvc::cli::positive_count());
  app.add_option("--presses", presses,
                 "Compare the decode speed of these eviction methods step by step in turn (comma-separated; the first, "
                 "usually none, is the reference) at the first --contexts length, --decode-tokens steps each")
      ->delimiter(',');
  app.add_option("--ratio", ratio, "With --presses: the share of the prompt's cache each press removes, in [0, 1)")
      ->capture_default_str();
  app.add_flag("--block-kernels", block_kernels,
               "Without a model: the block kernels (GGUF weights) on random blocks of every format, each kernel form "
               "and instruction-set level in turn, --decode-repeats alternated rounds; prefill products with the "
               "first --contexts length as the tokens; decode attention over f16 caches at each level");
  kvc::cli::add_json_switch(app, json, "Print the results as one JSON object on stdout (instead of the table)");
  kvc::cli::add_json_out(app, json_path, "Also write the results as JSON here");
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] {
    KVC_CHECK(!(json && json_path == "-"), "--json and --json-out - would both print the JSON on stdout; keep one");
    if (!json_path.empty()) kvc::claim_writable_output(json_path);  // before measuring the machine
    if (block_kernels) {
      KVC_CHECK(!contexts.empty() && contexts.front() > 0,
                "--block-kernels needs a token count (--contexts N, N >= 1)");
      kvc::set_threads(model_options.threads);
      nlohmann::json out = kvc::bench::compare_block_kernels(decode_repeats, contexts.front(), json ? stderr : stdout);
      out["version"] = kvc::build_version();
      out["commit"] = kvc::build_commit();
      if (!json_path.empty()) kvc::write_file_atomic(json_path, out.dump(2) + "\n");
      if (json) std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    auto model = model_options.load_model();
    const kvc::ModelConfig& c = model->config();
    const int threads = at::get_num_threads();
    if (!presses.empty()) {
      KVC_CHECK(!contexts.empty() && contexts.front() > 0, "--presses needs a prompt length (--contexts N, N >= 1)");
      nlohmann::json out =
          kvc::bench::compare_presses(*model, presses, ratio, random_tokens(contexts.front(), c.vocab_size, 1),
                                      decode_tokens, json ? stderr : stdout);
      out["model"] = model_options.model_dir;
      out["threads"] = threads;
      out["version"] = kvc::build_version();
      out["commit"] = kvc::build_commit();
      out["peak_rss_bytes"] = kvc::peak_rss_bytes();
      if (!json_path.empty()) kvc::write_file_atomic(json_path, out.dump(2) + "\n");
      if (json) std::printf("%s\n", out.dump().c_str());
      return 0;
    }
    std::fprintf(stderr, "measuring memory bandwidth and GEMM peak with %d threads...\n", threads);
    const bool gpu = !model->device().is_cpu();
    const bool valgrind = KVC_UNDER_VALGRIND();
    if (valgrind)
      std::fprintf(stderr, "under valgrind: the machine's limits are measured on token sizes (meaningless)\n");
    kvc::MemoryBandwidth bw = gpu        ? kvc::measure_device_bandwidth(model->device())
                              : valgrind ? kvc::measure_memory_bandwidth(int64_t{1} << 20, 1)
                                         : kvc::measure_memory_bandwidth();
    // The read limit is the best of a synthetic buffer and the model's own weights in their pages.
    const double weights_read = gpu || valgrind ? 0.0 : kvc::measure_read_bandwidth(model->decode_weights());
    bw.read_bytes_per_second = std::max(bw.read_bytes_per_second, weights_read);
    // On a GPU the GEMM peak is the model's dtype (bf16 runs on the tensor cores).
    const double gemm = gpu        ? kvc::measure_device_gemm_flops(model->device(), model->dtype())
                        : valgrind ? kvc::measure_gemm_flops(64, 1)
                                   : kvc::measure_gemm_flops();
    const int64_t weight_bytes = model->weight_bytes();
    const int64_t linear_params =
        model->parameter_count() - c.vocab_size * c.hidden_size * (c.tie_word_embeddings ? 1 : 2);

    nlohmann::json out = {{"model", model_options.model_dir},
                          {"parameters", model->parameter_count()},
                          {"weight_bytes_per_decode_step", weight_bytes},
                          {"threads", threads},
                          {"decode_tokens", decode_tokens},
                          {"decode_repeats", decode_repeats},
                          {"prefill_repeats", prefill_repeats},
                          {"weight_dtype", c10::toString(model->weight_dtype())},
                          {"weight_format", model->weight_format()},
                          {"cache_type_k", kvc::cache_type_name(model->cache_types().keys)},
                          {"cache_type_v", kvc::cache_type_name(model->cache_types().values)},
                          {"copy_bandwidth_gbs", bw.copy_bytes_per_second / 1e9},
                          {"read_bandwidth_gbs", bw.read_bytes_per_second / 1e9},
                          {"weights_read_bandwidth_gbs", weights_read / 1e9},
                          {"gemm_peak_gflops", gemm / 1e9},
                          {"device", model->device().str()},
                          {"version", kvc::build_version()},
                          {"commit", kvc::build_commit()},
                          {"runs", nlohmann::json::array()}};
    FILE* table = json ? stderr : stdout;  // --json keeps stdout for the one JSON object
    std::fprintf(
        table, "model %s: %.1fM parameters (%s), %.1f MB of weights read per decode step, KV cache %s/%s, %d threads\n",
        model_options.model_dir.c_str(), model->parameter_count() / 1e6, model->weight_format().c_str(),
        weight_bytes / 1e6, kvc::cache_type_name(model->cache_types().keys).c_str(),
        kvc::cache_type_name(model->cache_types().values).c_str(), threads);
    std::fprintf(table,
                 "%s: copy bandwidth %.2f GB/s (read+write), read bandwidth %.2f GB/s, %s GEMM peak %.1f GFLOP/s\n",
                 gpu ? model->device().str().c_str() : "machine", bw.copy_bytes_per_second / 1e9,
                 bw.read_bytes_per_second / 1e9, gpu ? c10::toString(model->dtype()) : "fp32", gemm / 1e9);
    {
      // Warm-up: first-touch page faults on the weights and thread-pool start-up are not throughput.
      kvc::KVCache warm = model->new_cache();
      kvc::ForwardOptions last_only;
      last_only.all_logits = false;
      // A GPU loads kernels on first use, and long prompts take other ones than short ones.
      const int64_t warm_tokens =
          gpu && !contexts.empty() ? std::min(contexts.front(), c.max_position_embeddings - 8) : 64;
      model->forward(random_tokens(warm_tokens, c.vocab_size, 1), warm, last_only);
      for (int i = 0; i < 4; ++i) model->forward({3}, warm, last_only);
    }
    std::fprintf(table, "%8s | %12s | %9s | %6s | %11s | %14s | %6s | %9s | %10s | %10s\n", "context", "prefill t/s",
                 "GFLOP/s", "%peak", "decode t/s", "bound t/s", "%bound", "%rd-bound", "%rd-beside", "KV MB");
    // Ctrl-C stops between layers of a prefill and between timed runs; nothing is printed or written.
    const auto stop_if_interrupted = [] { kvc::stop_if_interrupted("benchmark interrupted; nothing written"); };
    for (int64_t n : contexts) {
      stop_if_interrupted();
      KVC_CHECK(n + decode_tokens * decode_repeats <= c.max_position_embeddings,
                "--contexts: {} + {} decode tokens exceeds the model's context of {}", n,
                decode_tokens * decode_repeats, c.max_position_embeddings);
      const std::vector<int> prompt = random_tokens(n, c.vocab_size, static_cast<uint64_t>(n));
      kvc::ForwardOptions last_only;
      last_only.all_logits = false;
      last_only.stop_on_interrupt = true;
      kvc::KVCache cache = model->new_cache();
      at::Tensor logits;
      int next = 0;
      double prefill_s = 1e30;
      for (int r = 0; r < prefill_repeats; ++r) {
        stop_if_interrupted();
        cache = model->new_cache();
        // As kvc-generate does: room for the prompt and every decode step, so the cache never grows.
        cache.reserve(n + decode_tokens * decode_repeats);
        const auto t0 = std::chrono::steady_clock::now();
        logits = model->forward(prompt, cache, last_only);
        next = static_cast<int>(logits[0].argmax().item<int64_t>());  // on a GPU: waits for the prefill
        prefill_s = std::min(prefill_s, kvc::seconds_since(t0));
      }
      auto t0 = std::chrono::steady_clock::now();
      // The machine limits are best-of-5 measurements; decode gets the same treatment (best of
      // --decode-repeats runs) so that the ratio compares like with like on a noisy VM.
      double decode_s = 1e30;
      // The read bandwidth measured again right before each timed run (the weights in their pages, best of
      // 3): on a machine whose bandwidth swings between minutes, each run is judged against the bandwidth of
      // its own moment, and the runs' ratios give a median (--json: decode_fraction_of_read_bound_beside).
      std::vector<double> run_seconds, run_bandwidth;
      for (int r = 0; r < decode_repeats; ++r) {
        stop_if_interrupted();
        run_bandwidth.push_back(gpu || valgrind ? bw.read_bytes_per_second
                                                : kvc::measure_read_bandwidth(model->decode_weights(), 3));
        t0 = std::chrono::steady_clock::now();
        KVC_COUNT_INSTRUCTIONS_START();
        for (int64_t i = 0; i < decode_tokens; ++i) {
          logits = model->forward({next}, cache, last_only);
          next = static_cast<int>(logits[0].argmax().item<int64_t>());
        }
        KVC_COUNT_INSTRUCTIONS_STOP();
        run_seconds.push_back(kvc::seconds_since(t0) / static_cast<double>(decode_tokens));
        decode_s = std::min(decode_s, run_seconds.back());
      }
      const kvc::CacheFootprint kv = cache.footprint();
      // A decode step must at least stream every weight and the whole KV cache once. The bound uses the
      // copy bandwidth, the conservative figure; the pure-read figure is printed beside it, since a
      // decode step only reads and that measurement can come out well above the copy figure.
      const double step_bytes = static_cast<double>(weight_bytes + kv.step_read_bytes);
      const double bound_s = step_bytes / bw.copy_bytes_per_second;
      const double read_bound_s = step_bytes / bw.read_bytes_per_second;
      std::vector<double> beside_fractions, beside_bandwidths = run_bandwidth;
      for (size_t r = 0; r < run_seconds.size(); ++r) {
        if (run_bandwidth[r] > 0) beside_fractions.push_back(step_bytes / run_bandwidth[r] / run_seconds[r]);
      }
      const double beside = beside_fractions.empty() ? 0.0 : kvc::median_of(beside_fractions);
      const double flops = prefill_flops(c, linear_params, n) / prefill_s;
      std::fprintf(table, "%8lld | %12.1f | %9.1f | %5.1f%% | %11.2f | %14.2f | %5.1f%% | %8.1f%% | %9.1f%% | %10.1f\n",
                   static_cast<long long>(n), n / prefill_s, flops / 1e9, 100 * flops / gemm, 1 / decode_s, 1 / bound_s,
                   100 * bound_s / decode_s, 100 * read_bound_s / decode_s, 100 * beside, kv.resident_bytes / 1e6);
      std::fflush(table);
      out["runs"].push_back({{"context", n},
                             {"prefill_tokens_per_second", n / prefill_s},
                             {"prefill_gflops", flops / 1e9},
                             {"prefill_fraction_of_gemm_peak", flops / gemm},
                             {"decode_tokens_per_second", 1 / decode_s},
                             {"decode_bound_tokens_per_second", 1 / bound_s},
                             {"decode_fraction_of_bound", bound_s / decode_s},
                             {"decode_fraction_of_read_bound", read_bound_s / decode_s},
                             {"decode_fraction_of_read_bound_beside", beside},
                             {"read_bandwidth_beside_gbs", kvc::median_of(beside_bandwidths) / 1e9},
                             {"kv_resident_bytes", kv.resident_bytes},
                             {"kv_payload_bytes", kv.payload_bytes},
                             {"kv_window_payload_bytes", kv.window_payload_bytes}});
    }
    out["peak_rss_bytes"] = kvc::peak_rss_bytes();
    if (!json_path.empty()) kvc::write_file_atomic(json_path, out.dump(2) + "\n");
    if (json) std::printf("%s\n", out.dump().c_str());
    return 0;
  });
}
