#include "press/projected_values.h"

#include "model/linear_weight.h"
#include "util/error.h"

namespace kvc {

at::Tensor projected_value_head_norms(const LinearWeight& w_o, const at::Tensor& values, int64_t num_heads, int p) {
  const int64_t s = values.size(1), d = values.size(2), group = num_heads / values.size(0);
  KVC_CHECK(w_o.cols() == num_heads * d, "output projection has {} columns, expected {} heads x {}", w_o.cols(),
            num_heads, d);
  KVC_CHECK(p == 1 || p == 2, "projected value norms: p must be 1 or 2, got {}", p);
  // float32 products, float64 for a float64 model; a GGUF's blocks are dequantized for this once (their rows
  // are the output dimensions).
  const at::ScalarType math = values.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor w =
      (w_o.is_blocks() ? w_o.lookup_rows(at::arange(w_o.rows(), at::TensorOptions().dtype(at::kLong))) : w_o.dense())
          .to(values.device(), math);
  const at::Tensor v = values.to(math);
  at::Tensor out = at::empty({num_heads, s}, v.options().dtype(at::kDouble));
  // Head by head: the products of every head at once would hold n_heads × S × hidden floats.
  for (int64_t h = 0; h < num_heads; ++h) {
    const at::Tensor projected = at::matmul(v[h / group], w.narrow(1, h * d, d).t());  // [S, hidden]
    out[h] = (p == 1 ? projected.abs().sum(-1) : projected.norm(2, -1)).to(at::kDouble);
  }
  return out;
}

at::Tensor projected_value_norms(const LinearWeight& w_o, const at::Tensor& values, int64_t num_heads) {
  const at::Tensor heads = projected_value_head_norms(w_o, values, num_heads, 1);
  const int64_t kv = values.size(0), group = num_heads / kv;
  at::Tensor out = at::zeros({kv, values.size(1)}, heads.options());
  // Summed in head order, each divided by the group first (the mean kvpress' vwl1norm takes).
  for (int64_t h = 0; h < num_heads; ++h) out[h / group] += heads[h] / static_cast<double>(group);
  return out;
}

}  // namespace kvc
