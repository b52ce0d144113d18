#include "generation/lockstep_decode.h"

#include "util/error.h"

namespace kvc {

void run_decode_loops_lockstep(const LlamaModel& model, std::vector<LockstepSequence>& sequences,
                               const DecodeLimits& limits, const std::function<int(const at::Tensor&)>& choose) {
  KVC_CHECK(!limits.stop_on_interrupt, "run_decode_loops_lockstep: stop_on_interrupt is not offered");
  const ModelConfig& c = model.config();
  if (limits.max_new_tokens <= 0) {
    for (LockstepSequence& s : sequences) s.stop_reason = "max_new_tokens";
    return;
  }
  std::vector<int> next(sequences.size());
  std::vector<size_t> active;
  for (size_t b = 0; b < sequences.size(); ++b) {
    next[b] = choose(sequences[b].logits);
    active.push_back(b);
  }
  // The checks of run_decode_loop for each sequence still running; then one step for all those it feeds.
  for (int64_t i = 0; !active.empty(); ++i) {
    std::vector<size_t> fed;
    for (size_t b : active) {
      LockstepSequence& s = sequences[b];
      s.stop_reason = decode_step_verdict(c, *s.cache, next[b], i, limits, s.keep);
      if (s.stop_reason.empty()) fed.push_back(b);
    }
    if (fed.empty()) break;
    std::vector<int> tokens;
    std::vector<KVCache*> caches;
    std::vector<ForwardOptions> options;
    for (size_t b : fed) {
      tokens.push_back(next[b]);
      caches.push_back(sequences[b].cache);
      options.push_back(sequences[b].options);
    }
    const at::Tensor logits = model.forward_lockstep(tokens, caches, options);
    for (size_t j = 0; j < fed.size(); ++j) {
      sequences[fed[j]].logits = logits.narrow(0, static_cast<int64_t>(j), 1);
      next[fed[j]] = choose(sequences[fed[j]].logits);
    }
    active = std::move(fed);
  }
}

}  // namespace kvc
