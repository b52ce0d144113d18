#pragma once
// The token-by-token loop every caller that decodes text shares (kvc-generate, the task harness,
// kvc-train inspect): from the logits of the last forward pass, `choose` picks a token, `keep` takes
// it, and it is fed back, until a stop condition. kvc-bench times the forward pass alone and
// kvc-cluster replay steps several caches in lockstep, so they keep loops of their own.
#include <functional>
#include <string>

#include "cache/kv_cache.h"
#include "model/llama_model.h"

namespace kvc {

struct DecodeLimits {
  int64_t max_new_tokens = 0;
  bool stop_at_eos = true;
  bool keep_eos = true;             // hand the end-of-sequence token to `keep` before stopping
  bool allow_past_context = false;  // a bounded cache may decode past the trained context
  bool stop_on_interrupt = false;   // Ctrl-C ends the loop ("interrupted")
};

// What the loop does with `token`, chosen at step `step` (0-based) with `cache` holding everything fed so far:
// hands it to `keep` (unless it is an end-of-sequence token the limits drop) and returns why the loop stops
// there, or "" to feed it. The one order of checks for run_decode_loop and the lockstep loops.
std::string decode_step_verdict(const ModelConfig& config, const KVCache& cache, int token, int64_t step,
                                const DecodeLimits& limits, const std::function<std::string(int)>& keep);

// Returns why it stopped: "max_new_tokens", "eos", "context", "interrupted", or the non-empty reason
// `keep` returned. `after_forward`, if given, runs after each forward pass (e.g. memory accounting).
std::string run_decode_loop(const LlamaModel& model, KVCache& cache, at::Tensor logits, const DecodeLimits& limits,
                            const ForwardOptions& options, const std::function<int(const at::Tensor&)>& choose,
                            const std::function<std::string(int)>& keep,
                            const std::function<void()>& after_forward = {});

}  // namespace kvc
