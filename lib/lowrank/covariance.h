#pragma once
// Second-moment statistics of K or V states for the PCA basis, in float64.
//
// Not mean-centred, on purpose: the cache reconstructs x̄ = x̂[:r] U^{-1}[:r,:] with no mean added
// back, so the basis that minimises the truncation error E||x - x̄||² is the eigenbasis of the
// uncentred second moment E[x xᵀ] (centring would be optimal only if the mean were stored too).
#include <ATen/ATen.h>

#include <vector>

namespace kvc::lowrank {

class SecondMoment {
 public:
  explicit SecondMoment(int64_t dim);
  void add(const at::Tensor& rows);  // [n, dim], any float dtype
  int64_t count() const { return count_; }
  at::Tensor matrix() const;  // E[x xᵀ], [dim, dim] float64
  // Σ x xᵀ and the row count, in place, for adding the accumulators of several ranks.
  at::Tensor& sum() { return sum_; }
  void set_count(int64_t count) { count_ = count; }

 private:
  at::Tensor sum_;  // Σ x xᵀ, float64
  int64_t count_ = 0;
};

struct EigenBasis {
  at::Tensor eigenvalues;   // [dim] float64, descending
  at::Tensor eigenvectors;  // [dim, dim] float64, column i <-> eigenvalues[i]
  // Share of Σ eigenvalues in the leading k directions.
  double explained(int64_t k) const;
};

EigenBasis eigen_basis(const at::Tensor& symmetric);

}  // namespace kvc::lowrank
