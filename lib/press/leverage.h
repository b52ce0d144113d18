#pragma once
// Statistical leverage of keys (Chari & Van Durme 2025, Compactor, arXiv:2507.08143): how far a key lies
// from the span the other keys fill. Shared by the leverage press and Compactor.
#include <ATen/ATen.h>

namespace kvc {

// keys [n_kv, S, d] (before RoPE) -> [n_kv, S] float64: with X the keys centred over the sequence, the
// ridge leverage diag(X (XᵀX + ridge·I)⁻¹ Xᵀ), clamped at 0.
at::Tensor key_leverage(const at::Tensor& keys, double ridge);

}  // namespace kvc
