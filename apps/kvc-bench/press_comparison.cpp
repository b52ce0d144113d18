#include "press_comparison.h"

#include "compression/compression_spec.h"
#include "generation/interleaved_decode.h"
#include "util/error.h"

namespace kvc::bench {

nlohmann::json compare_presses(const LlamaModel& model, const std::vector<std::string>& presses, double ratio,
                               const std::vector<int>& prompt, int64_t steps, FILE* table) {
  KVC_CHECK(presses.size() >= 2, "--presses: give the reference and at least one press to compare (e.g. none,h2o)");
  check_interleaved_decode(model, static_cast<int64_t>(prompt.size()), steps);
  std::vector<std::pair<std::string, CacheSetup>> setups;
  for (const std::string& press : presses) {
    CompressionSpec spec;
    spec.press = press;
    spec.ratio = press == "none" ? 0.0 : ratio;
    check_flag_combination(spec);
    setups.emplace_back(press, build_cache_setup(spec, model));
  }
  std::fprintf(stderr, "prefilling %zu tokens into %zu caches, then %lld decode steps in each, in turn...\n",
               prompt.size(), setups.size(), static_cast<long long>(steps));
  const std::vector<InterleavedRun> runs = interleaved_decode(model, prompt, setups, steps);
  const int64_t weight_bytes = model.weight_bytes();
  const InterleavedRun& reference = runs.front();
  const double reference_step_bytes = static_cast<double>(weight_bytes + reference.kv.step_read_bytes);
  std::fprintf(table, "%-16s | %10s | %8s | %8s | %7s | %11s | %9s\n", "press", "decode t/s", "speed-up", "step MB",
               "limit", "resident MB", "prefill s");
  nlohmann::json out = {
      {"prompt_tokens", prompt.size()}, {"steps", runs.front().steps}, {"ratio", ratio},
      {"weight_bytes", weight_bytes},   {"reference", reference.name}, {"runs", nlohmann::json::array()}};
  for (const InterleavedRun& r : runs) {
    const double step_bytes = static_cast<double>(weight_bytes + r.kv.step_read_bytes);
    const double speedup = reference.decode_seconds / r.decode_seconds;
    const double limit = reference_step_bytes / step_bytes;
    std::fprintf(table, "%-16s | %10.2f | %7.3fx | %8.1f | %6.3fx | %11.1f | %9.2f\n", r.name.c_str(),
                 r.decode_tokens_per_second(), speedup, step_bytes / 1e6, limit, r.kv.resident_bytes / 1e6,
                 r.prefill_seconds);
    out["runs"].push_back({{"press", r.name},
                           {"ratio", r.name == "none" ? 0.0 : ratio},
                           {"decode_tokens_per_second", r.decode_tokens_per_second()},
                           {"decode_seconds", r.decode_seconds},
                           {"decode_speedup", speedup},
                           {"step_read_bytes", static_cast<int64_t>(step_bytes)},
                           {"limit", limit},
                           {"kv_resident_bytes", r.kv.resident_bytes},
                           {"prefill_seconds", r.prefill_seconds},
                           {"generated_ids", r.tokens}});
  }
  return out;
}

}  // namespace kvc::bench
