#include "generation/decode_loop.h"

#include "util/interrupt.h"

namespace kvc {

std::string decode_step_verdict(const ModelConfig& c, const KVCache& cache, int token, int64_t step,
                                const DecodeLimits& limits, const std::function<std::string(int)>& keep) {
  const bool eos = limits.stop_at_eos && c.is_eos(token);
  if (eos && !limits.keep_eos) return "eos";
  const std::string reason = keep(token);
  if (eos) return "eos";
  if (!reason.empty()) return reason;
  if (step + 1 == limits.max_new_tokens) return "max_new_tokens";
  if (limits.stop_on_interrupt && interrupted()) return "interrupted";
  if (!limits.allow_past_context && cache.next_position() >= c.max_position_embeddings) return "context";
  return "";
}

std::string run_decode_loop(const LlamaModel& model, KVCache& cache, at::Tensor logits, const DecodeLimits& limits,
                            const ForwardOptions& options, const std::function<int(const at::Tensor&)>& choose,
                            const std::function<std::string(int)>& keep, const std::function<void()>& after_forward) {
  const ModelConfig& c = model.config();
  if (limits.max_new_tokens <= 0) return "max_new_tokens";
  int next = choose(logits);
  for (int64_t i = 0;; ++i) {
    const std::string verdict = decode_step_verdict(c, cache, next, i, limits, keep);
    if (!verdict.empty()) return verdict;
    logits = model.forward({next}, cache, options);
    if (after_forward) after_forward();
    next = choose(logits);
  }
}

}  // namespace kvc
