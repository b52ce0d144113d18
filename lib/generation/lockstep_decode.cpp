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
  // The checks of run_decode_loop, in its order, for each sequence still running; then one step for all.
  for (int64_t i = 0; !active.empty(); ++i) {
    std::vector<size_t> fed;
    for (size_t b : active) {
      LockstepSequence& s = sequences[b];
      const bool eos = limits.stop_at_eos && c.is_eos(next[b]);
      if (eos && !limits.keep_eos) {
        s.stop_reason = "eos";
        continue;
      }
      const std::string reason = s.keep(next[b]);
      if (eos) {
        s.stop_reason = "eos";
      } else if (!reason.empty()) {
        s.stop_reason = reason;
      } else if (i + 1 == limits.max_new_tokens) {
        s.stop_reason = "max_new_tokens";
      } else if (!limits.allow_past_context && s.cache->next_position() >= c.max_position_embeddings) {
        s.stop_reason = "context";
      } else {
        fed.push_back(b);
      }
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
