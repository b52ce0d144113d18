// The uniform allocation: the defaults of Allocator's hooks.
#include "press/allocator.h"

namespace kvc {

std::vector<int64_t> Allocator::layer_bounds(const PressContext& ctx) {
  return std::vector<int64_t>(static_cast<size_t>(ctx.shape().num_layers), ctx.budget());
}

void Allocator::prefill_layer(PressContext& ctx, const LayerStep& step) {
  ctx.compress(step.layer, ctx.score(step.layer, &step), ctx.bound(step.layer));
}

}  // namespace kvc
