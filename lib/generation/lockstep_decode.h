#pragma once
// run_decode_loop (decode_loop.h) for several sequences at once, each with its own cache, first logits,
// options and `keep`: their steps run in lockstep (LlamaModel::forward_lockstep), sharing each read of the
// weights, and each sequence stops and is fed exactly as run_decode_loop would stop and feed it alone. A
// sweep's cells decode this way.
#include <functional>
#include <string>
#include <vector>

#include "generation/decode_loop.h"

namespace kvc {

struct LockstepSequence {
  KVCache* cache = nullptr;  // not owned
  at::Tensor logits;         // of the last forward pass [1, vocab]
  ForwardOptions options;
  std::function<std::string(int)> keep;
  std::string stop_reason;  // set by run_decode_loops_lockstep: what run_decode_loop would return
};

// `choose` is called with one sequence's logits [1, vocab] at a time. limits.stop_on_interrupt and
// `after_forward` are not offered: a sweep stops between its cells.
void run_decode_loops_lockstep(const LlamaModel& model, std::vector<LockstepSequence>& sequences,
                               const DecodeLimits& limits, const std::function<int(const at::Tensor&)>& choose);

}  // namespace kvc
