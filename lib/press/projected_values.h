#pragma once
// How much each cached value can move the layer's output: ‖W_o,h v‖₁ through each query head's slice of the
// output projection (CriticalKV, arXiv:2502.03805).
#include <ATen/ATen.h>

namespace kvc {

class LinearWeight;

// values [n_kv, S, d], w_o [hidden, n_heads · d] (dense or GGUF blocks) -> [n_kv, S] float64: the L1 norm
// of W_o,h v for every query head h, averaged over the query heads of each KV head (kvpress' vwl1norm).
at::Tensor projected_value_norms(const LinearWeight& w_o, const at::Tensor& values, int64_t num_heads);
// The same per query head, [n_heads, S] float64: ‖W_o,h v‖_p (p = 1 or 2) through head h's slice, for the values
// of its KV head.
at::Tensor projected_value_head_norms(const LinearWeight& w_o, const at::Tensor& values, int64_t num_heads, int p);

}  // namespace kvc
