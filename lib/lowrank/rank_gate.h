#pragma once
// The token-wise rank gate: p = softmax(x̃ W + b) over the d_kv possible cut-offs, soft mask
// m_i = Σ_{j>=i} p_j (non-increasing, m_0 = 1), hard rank = #{i : m_i > τ} (a prefix of ones).
// Shared by the inference cache (hard ranks) and training (soft masks), so both see the same gate.
#include <ATen/ATen.h>

namespace kvc::lowrank {

// coeffs [T, d] in the spectral basis -> soft mask [T, d]. Differentiable (no in-place ops).
at::Tensor soft_mask(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b);

// Ranks [T] int64 (each in 1..d): how many leading coefficients each token keeps at threshold tau.
at::Tensor hard_ranks(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b, double tau);
// The same from the gate's logits x̃ W + b [T, d], computed by the caller.
at::Tensor hard_ranks_from_logits(const at::Tensor& logits, double tau);

}  // namespace kvc::lowrank
