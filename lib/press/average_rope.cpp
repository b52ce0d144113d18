#include "press/average_rope.h"

#include "core/rope.h"
#include "util/error.h"

namespace kvc {

at::Tensor average_rotation(const Rope& rope, int64_t first, int64_t count) {
  KVC_CHECK(count >= 1, "average RoPE: at least one future position, got {}", count);
  const at::Tensor inv_freq = rope.inv_freq().to(at::kCPU, at::kDouble);  // [d/2]
  const int64_t half = inv_freq.size(0), d = 2 * half;
  const at::Tensor pos = at::arange(first, first + count, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor angles = at::outer(pos, inv_freq);  // [count, d/2]
  const at::Tensor c = angles.cos().mean(0), s = angles.sin().mean(0);
  // R(p) x: x_i cos − x_{i+d/2} sin for i < d/2, x_{i+d/2} cos + x_i sin for the second half; the mean of
  // the rotations is the same block matrix with the mean cosines and sines.
  at::Tensor r = at::zeros({d, d}, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor i = at::arange(half, at::TensorOptions().dtype(at::kLong));
  r.index_put_({i, i}, c);
  r.index_put_({i + half, i + half}, c);
  r.index_put_({i, i + half}, -s);
  r.index_put_({i + half, i}, s);
  return r;
}

}  // namespace kvc
