#include "lowrank/rank_gate.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kvc::lowrank {

at::Tensor soft_mask(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b) {
  const at::Tensor p = at::softmax(at::addmm(b, coeffs, W), -1);
  // Reverse cumulative sum: m_i = Σ_{j>=i} p_j.
  return p.flip(-1).cumsum(-1).flip(-1);
}

at::Tensor hard_ranks(const at::Tensor& coeffs, const at::Tensor& W, const at::Tensor& b, double tau) {
  return hard_ranks_from_logits(at::addmm(b, coeffs, W), tau);
}

namespace {

// One pass per row on the host, in float64: a decode step's single row would otherwise pay eight
// tensor operations (softmax, two flips, cumsum, compare, sum, clamp, cast).
template <typename T>
at::Tensor hard_ranks_on_host(const at::Tensor& logits, double tau) {
  const at::Tensor l = logits.contiguous();
  const int64_t rows = l.size(0), d = l.size(1);
  at::Tensor ranks = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
  const T* x = l.data_ptr<T>();
  int64_t* out = ranks.data_ptr<int64_t>();
  std::vector<double> p(static_cast<size_t>(d));
  for (int64_t i = 0; i < rows; ++i, x += d) {
    const double top = d > 0 ? static_cast<double>(*std::max_element(x, x + d)) : 0.0;
    double total = 0;
    for (int64_t j = 0; j < d; ++j) total += p[j] = std::exp(static_cast<double>(x[j]) - top);
    // m_j = Σ_{k>=j} p_k / total, counted from the tail.
    double tail = 0;
    int64_t kept = 0;
    for (int64_t j = d - 1; j >= 0; --j) {
      tail += p[j];
      kept += tail / total > tau;
    }
    out[i] = std::max<int64_t>(kept, 1);
  }
  return ranks;
}

}  // namespace

at::Tensor hard_ranks_from_logits(const at::Tensor& logits, double tau) {
  if (logits.device().is_cpu() && logits.dim() == 2 && !logits.requires_grad()) {
    if (logits.scalar_type() == at::kFloat) return hard_ranks_on_host<float>(logits, tau);
    if (logits.scalar_type() == at::kDouble) return hard_ranks_on_host<double>(logits, tau);
  }
  const at::Tensor mask = at::softmax(logits, -1).flip(-1).cumsum(-1).flip(-1);
  // m_0 = Σ p = 1 > τ for τ < 1, so every token keeps at least one coefficient.
  return (mask > tau).sum(-1).clamp_min(1).to(at::kLong);
}

}  // namespace kvc::lowrank
