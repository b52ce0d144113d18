#pragma once
// Decode speed of several caches compared step by step: each cache gets the same prompt, then every
// round runs one greedy decode step in each of them in turn. On a machine whose memory bandwidth drifts
// from second to second (a shared VM), steps a few milliseconds apart see the same machine, so the
// ratio of two caches' decode times holds even where separate runs of each would differ by more
// than the effect measured.
#include <string>
#include <utility>
#include <vector>

#include "cache/layer_cache.h"
#include "model/cache_setup.h"
#include "model/llama_model.h"

namespace kvc {

struct InterleavedRun {
  std::string name;
  double prefill_seconds = 0;
  double decode_seconds = 0;  // the sum of this cache's decode steps alone
  int64_t steps = 0;
  std::vector<int> tokens;  // the greedy token after the prompt, then one per step
  CacheFootprint kv;        // after the last step
  double decode_tokens_per_second() const {
    return decode_seconds > 0 ? static_cast<double>(steps) / decode_seconds : 0;
  }
};

// One-line kvc::Error unless `prompt_tokens` + `steps` decode steps fit the model's context (steps >= 1).
void check_interleaved_decode(const LlamaModel& model, int64_t prompt_tokens, int64_t steps);

// Prefills `prompt` into a new cache of each setup (with its observer, as kvc-generate does), then runs
// `steps` rounds of one greedy decode step per cache. Stops early, after a whole round, on Ctrl-C.
std::vector<InterleavedRun> interleaved_decode(const LlamaModel& model, const std::vector<int>& prompt,
                                               const std::vector<std::pair<std::string, CacheSetup>>& setups,
                                               int64_t steps);

}  // namespace kvc
