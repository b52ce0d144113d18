#include "lowrank/soft_mask_layer_cache.h"

#include "cache/blocked_attention.h"
#include "lowrank/rank_gate.h"
#include "util/error.h"

namespace kvc::lowrank {

SoftMaskLayerCache::SoftMaskLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, const GateParams& k,
                                       const GateParams& v, double tau, MaskLog* log)
    : shape_(shape), rope_(std::move(rope)), k_(k), v_(v), tau_(tau), log_(log) {
  const auto inverse = [](const GateParams& g) { return g.W.defined() ? torch::linalg_inv(g.U) : g.U.transpose(0, 1); };
  k_inv_ = inverse(k);
  v_inv_ = inverse(v);
}

void SoftMaskLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  const int64_t T = keys.size(1), KV = shape_.num_kv_heads, d = shape_.head_dim;
  keys_.push_back(rope_->apply(project(keys, k_, k_inv_).view({T, KV, d}).transpose(0, 1), positions));
  values_.push_back(project(values, v_, v_inv_).view({T, KV, d}).transpose(0, 1));
  positions_.push_back(positions);
}

at::Tensor SoftMaskLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe&,
                                      AttentionStats*) {
  DenseEntries entries(torch::cat(keys_, 1), torch::cat(values_, 1), torch::cat(positions_).view({1, -1}));
  return blocked_attention(shape_, queries, q_positions, entries, {}, nullptr);
}

void SoftMaskLayerCache::retain(const at::Tensor&) { fail("training cache: eviction is not part of gate training"); }

at::Tensor SoftMaskLayerCache::lengths() const {
  int64_t n = 0;
  for (const auto& p : positions_) n += p.numel();
  return at::full({shape_.num_kv_heads}, n, at::TensorOptions().dtype(at::kLong));
}

torch::Tensor SoftMaskLayerCache::project(const torch::Tensor& x, const GateParams& g, const torch::Tensor& inv) {
  const int64_t T = x.size(1);
  const torch::Tensor coeffs = torch::matmul(x.transpose(0, 1).reshape({T, -1}), g.U);
  if (!g.W.defined()) {
    const int64_t d = g.U.size(1);
    log_->soft_means.push_back(torch::full({}, static_cast<double>(g.rank) / static_cast<double>(d), coeffs.options()));
    log_->hard_sum += static_cast<double>(g.rank * T);
    log_->hard_count += static_cast<double>(d * T);
    return torch::matmul(coeffs.narrow(1, 0, g.rank), inv.narrow(0, 0, g.rank));
  }
  const torch::Tensor m = soft_mask(coeffs, g.W, g.b);
  log_->soft_means.push_back(m.mean());
  log_->hard_sum += (m.detach() > tau_).sum().item<double>();
  log_->hard_count += static_cast<double>(m.numel());
  return torch::matmul(coeffs * m, inv);
}

}  // namespace kvc::lowrank
