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

// Returns why it stopped: "max_new_tokens", "eos", "context", "interrupted", or the non-empty reason
// `keep` returned. `after_forward`, if given, runs after each forward pass (e.g. memory accounting).
std::string run_decode_loop(const LlamaModel& model, KVCache& cache, at::Tensor logits, const DecodeLimits& limits,
                            const ForwardOptions& options, const std::function<int(const at::Tensor&)>& choose,
                            const std::function<std::string(int)>& keep,
                            const std::function<void()>& after_forward = {});

}  // namespace kvc
