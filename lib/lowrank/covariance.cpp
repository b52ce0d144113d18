#include "lowrank/covariance.h"

#include "util/error.h"

namespace kvc::lowrank {

SecondMoment::SecondMoment(int64_t dim) : sum_(at::zeros({dim, dim}, at::TensorOptions().dtype(at::kDouble))) {}

void SecondMoment::add(const at::Tensor& rows) {
  const at::Tensor x = rows.detach().to(at::kCPU, at::kDouble);
  sum_.addmm_(x.t(), x);
  count_ += x.size(0);
}

at::Tensor SecondMoment::matrix() const {
  KVC_CHECK(count_ > 0, "calibration saw no tokens");
  return sum_ / static_cast<double>(count_);
}

double EigenBasis::explained(int64_t k) const {
  const double total = eigenvalues.clamp_min(0).sum().item<double>();
  return total > 0 ? eigenvalues.narrow(0, 0, k).clamp_min(0).sum().item<double>() / total : 0.0;
}

EigenBasis eigen_basis(const at::Tensor& symmetric) {
  // Symmetrise against rounding, then eigh (ascending) and flip to descending order.
  const at::Tensor m = (symmetric + symmetric.t()) * 0.5;
  auto [values, vectors] = at::linalg_eigh(m);
  return {values.flip(0).contiguous(), vectors.flip(1).contiguous()};
}

}  // namespace kvc::lowrank
