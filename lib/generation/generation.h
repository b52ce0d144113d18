#pragma once
// Prefill + token-by-token decoding with timing and memory accounting.
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "generation/sampler.h"
#include "model/llama_model.h"

namespace kvc {

struct GenerationRequest {
  std::vector<int> prompt;
  int64_t max_new_tokens = 128;
  SamplingParams sampling;
  bool stop_at_eos = true;
  // Decoding past the trained context is allowed only when the cache is bounded (eviction).
  bool allow_past_context = false;
  // Count the ATen operator calls of the decode steps (AtenOpCounter): off for timed runs.
  bool count_ops = false;
  // A progress line on stderr for a prefill that runs longer than a second (layers done of all).
  bool show_prefill_progress = false;
};

struct GenerationStats {
  int64_t prompt_tokens = 0;
  int64_t generated_tokens = 0;
  double prefill_seconds = 0;
  double decode_seconds = 0;
  CacheFootprint kv_after_prefill;
  CacheFootprint kv_final;
  int64_t kv_peak_resident_bytes = 0;
  int64_t peak_rss_bytes = 0;
  int64_t decode_aten_ops = -1;                            // with GenerationRequest::count_ops; -1: not counted
  std::map<std::string, int64_t> decode_aten_ops_by_name;  // the same calls by operator name
  double prefill_tokens_per_second() const { return prefill_seconds > 0 ? prompt_tokens / prefill_seconds : 0; }
  double decode_tokens_per_second() const {
    return decode_seconds > 0 && generated_tokens > 1 ? (generated_tokens - 1) / decode_seconds : 0;
  }
  // Per forward pass of the decode (the passes after the first new token, as for the rate above).
  double decode_aten_ops_per_step() const { return per_decode_step(decode_aten_ops); }
  double per_decode_step(int64_t count) const {
    return generated_tokens > 1 ? static_cast<double>(count) / static_cast<double>(generated_tokens - 1) : 0;
  }
};

struct GenerationResult {
  std::vector<int> tokens;
  std::string stop_reason;  // eos | max_new_tokens | context | interrupted
  GenerationStats stats;
};

// Calls on_token for each new token as soon as it is chosen (for streaming). `observer`, if given,
// sees every forward call (prefill and decode) — how compression methods act on the cache.
GenerationResult generate(const LlamaModel& model, KVCache& cache, const GenerationRequest& request,
                          const std::function<void(int)>& on_token = {}, ForwardObserver* observer = nullptr);

}  // namespace kvc
