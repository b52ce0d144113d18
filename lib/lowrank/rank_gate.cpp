#include "lowrank/rank_gate.h"

namespace kvc::lowrank {

at::Tensor soft_mask(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b) {
  const at::Tensor p = at::softmax(at::addmm(b, coeffs, W), -1);
  // Reverse cumulative sum: m_i = Σ_{j>=i} p_j.
  return p.flip(-1).cumsum(-1).flip(-1);
}

at::Tensor hard_ranks(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b, double tau) {
  return hard_ranks_from_logits(at::addmm(b, coeffs, W), tau);
}

at::Tensor hard_ranks_from_logits(const at::Tensor& logits, double tau) {
  const at::Tensor mask = at::softmax(logits, -1).flip(-1).cumsum(-1).flip(-1);
  // m_0 = Σ p = 1 > τ for τ < 1, so every token keeps at least one coefficient.
  return (mask > tau).sum(-1).clamp_min(1).to(at::kLong);
}

}  // namespace kvc::lowrank
