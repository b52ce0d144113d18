#include "lowrank/grouped_basis.h"

#include "lowrank/covariance.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

int64_t group_count(int64_t dim, int64_t num_kv_heads, int64_t group_size) {
  KVC_CHECK(group_size >= 1 && num_kv_heads % group_size == 0,
            "--lowrank: group={} must divide the model's {} KV heads", group_size, num_kv_heads);
  KVC_CHECK(dim % num_kv_heads == 0, "--lowrank: d_kv {} is not a multiple of the {} KV heads", dim, num_kv_heads);
  return num_kv_heads / group_size;
}

}  // namespace

Projection interleave_groups(const std::vector<at::Tensor>& bases, const std::vector<at::Tensor>& strengths) {
  const auto groups = static_cast<int64_t>(bases.size());
  KVC_CHECK(groups >= 1 && strengths.size() == bases.size(), "interleave_groups: one strength vector per basis");
  const int64_t c = bases[0].size(0), d = c * groups;
  at::Tensor U = at::zeros({d, d}, at::kDouble), eigenvalues = at::empty({d}, at::kDouble);
  for (int64_t g = 0; g < groups; ++g) {
    const auto gi = static_cast<size_t>(g);
    // Direction i of group g is column i · G + g; its rows are the group's dimensions.
    const at::Tensor columns = at::arange(g, d, groups, at::kLong);
    U.narrow(0, g * c, c).index_copy_(1, columns, bases[gi].to(at::kDouble));
    eigenvalues.index_copy_(0, columns, strengths[gi].to(at::kDouble));
  }
  Projection p;
  p.U = U.to(at::kFloat);
  p.eigenvalues = eigenvalues;
  return p;
}

Projection grouped_from_moment(const Projection& full, int64_t num_kv_heads, int64_t group_size) {
  KVC_CHECK(full.eigenvalues.defined(), "--lowrank: group= needs a bases file from kvc-calibrate (its eigenvalues)");
  const int64_t d = full.U.size(0), groups = group_count(d, num_kv_heads, group_size), c = d / groups;
  const at::Tensor U = full.U.to(at::kDouble);
  const at::Tensor moment = at::matmul(U * full.eigenvalues.to(at::kDouble).unsqueeze(0), U.t());  // U Λ Uᵀ
  std::vector<at::Tensor> bases, strengths;
  for (int64_t g = 0; g < groups; ++g) {
    const at::Tensor block = moment.narrow(0, g * c, c).narrow(1, g * c, c);
    const EigenBasis e = eigen_basis(block);  // symmetrises it
    bases.push_back(e.eigenvectors);
    strengths.push_back(e.eigenvalues);
  }
  return interleave_groups(bases, strengths);
}

Projection grouped_from_weight(const at::Tensor& weight, int64_t num_kv_heads, int64_t group_size) {
  const int64_t d = weight.size(0), groups = group_count(d, num_kv_heads, group_size), c = d / groups;
  std::vector<at::Tensor> bases, strengths;
  for (int64_t g = 0; g < groups; ++g) {
    // W_g = U Σ Vᵀ: the group's outputs x W_gᵀ = x V Σ Uᵀ live in the span of U's columns, strongest first.
    const auto [u, sigma, vh] = at::linalg_svd(weight.narrow(0, g * c, c).to(at::kDouble), /*full_matrices=*/false);
    KVC_CHECK(u.size(1) == c,
              "--lowrank: palu: a group's weights have rank at most {} (hidden size) < {} dims; "
              "use larger groups",
              u.size(1), c);
    bases.push_back(u);
    strengths.push_back(sigma.pow(2));
  }
  return interleave_groups(bases, strengths);
}

}  // namespace kvc::lowrank
