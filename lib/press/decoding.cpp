// Compression while decoding (kvpress' DecodingPress and CompressionRatioDecodingPress): the prompt is
// kept whole (or compressed by the base at --ratio / --budget: kvpress' PrefillDecodingPress with one
// scorer for both), the cache then grows while decoding, and every `interval` passes each layer's whole
// cache is scored by the base scorer and cut to `target` entries per KV head — or, with fraction=r, to
// floor(tokens seen × (1 − r)) of them. Scorers that rank the attention of the newest queries (snapkv)
// see the last decoded queries (at most their window, since the last compression; kvpress buffers up to
// 256 hidden states and recomputes their queries), attending to every entry at or before their
// positions. Usage: decoding:base=snapkv,interval=512,target=2048 (other keys go to the base).
// cam: the same schedule with CaM's merge before each cut (press/cam_merge.h), cam:...,merge=32,seed=0.
#include <algorithm>
#include <set>

#include "cache/probe_reduction.h"
#include "press/press.h"

namespace kvc {
namespace {

// Bases whose scores read the cached keys and values, their positions, or the newest queries' attention,
// which the whole cache and the buffered queries give; the others score the prompt's own queries or
// statistics gathered while it was read, which decoding does not have.
const std::set<std::string>& decoding_bases() {
  static const std::set<std::string> names{"snapkv", "knorm", "keydiff", "lagkv", "streaming_llm", "random"};
  return names;
}

PressConfig build(const PressParams& p, bool cam) {
  const PressParams base = base_press_params(p, "snapkv", {"interval", "target", "fraction", "merge", "seed"});
  if (!cam) {
    for (const char* key : {"merge", "seed"})
      KVC_CHECK(!p.typed().has(key), "--press {}: {}= is a parameter of cam (CaM's merge), not of {}", p.name, key,
                p.name);
  }
  if (!decoding_bases().count(base.name)) {
    std::string names;
    for (const std::string& n : decoding_bases()) names += (names.empty() ? "" : ", ") + n;
    KVC_CHECK(false,
              "--press {}: base={} cannot score the cache while decoding (it reads the prompt's own queries or "
              "statistics gathered at prefill, or bounds the cache itself); use one of {}",
              p.name, base.name, names);
  }
  PressConfig c = build_method_config(base);
  c.bounded = false;  // the schedule's cuts replace a bounded base's eviction at every step (streaming_llm)
  PressConfig::DecodingSchedule& schedule = c.decoding;
  const SpecValues typed = p.typed();
  schedule.interval = typed.get_int("interval", 512);
  KVC_CHECK(schedule.interval >= 1, "--press {}: interval must be >= 1 (decode passes between compressions), got {}",
            p.name, schedule.interval);
  const bool by_fraction = typed.has("fraction");
  KVC_CHECK(!(by_fraction && typed.has("target")),
            "--press {}: give target=N (entries kept) or fraction=R (share of the tokens seen removed), not both",
            p.name);
  if (by_fraction) {
    schedule.fraction = typed.get_number("fraction", 0.5);
    KVC_CHECK(schedule.fraction > 0 && schedule.fraction < 1,
              "--press {}: fraction must be in (0, 1) (the share of the tokens seen removed), got {}", p.name,
              schedule.fraction);
  } else {
    schedule.target = typed.get_int("target", 2048);
    KVC_CHECK(schedule.target >= 1, "--press {}: target must be >= 1 (entries kept per KV head), got {}", p.name,
              schedule.target);
  }
  // The queries the scorer reads: its window, or every one for a reduction over them.
  schedule.window = std::max<int64_t>(1, probe_with_reductions(c.scorer->probe()).window);
  if (cam) {
    schedule.merge_window = typed.get_int("merge", 32);
    KVC_CHECK(schedule.merge_window >= 1,
              "--press {}: merge must be >= 1 (kept entries after an evicted one that share its value), got {}", p.name,
              schedule.merge_window);
    schedule.seed = static_cast<uint64_t>(typed.get_count("seed", 0));
    c.shared_heads = true;  // one selection for every head, by the scores averaged over heads
  }
  return c;
}

}  // namespace

void register_decoding() {
  register_method(
      "decoding",
      "every interval decode steps the whole cache is scored by the base and cut to target entries, or "
      "to (1 - fraction) of the tokens seen (kvpress' DecodingPress / CompressionRatioDecodingPress; "
      "base=snapkv,interval=512,target=2048)",
      [](const PressParams& p) { return build(p, false); }, /*sizes_itself=*/true);
  register_method(
      "cam",
      "decoding's schedule, and before each cut the evicted entries ranked highest fold their values into "
      "the next kept ones with a probability from the attention they received (CaM, ICML 2024; kvpress' "
      "CAMPress; base=snapkv,interval=512,target=2048,merge=32,seed=0)",
      [](const PressParams& p) { return build(p, true); }, /*sizes_itself=*/true);
}

}  // namespace kvc
