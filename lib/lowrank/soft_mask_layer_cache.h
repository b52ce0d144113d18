#pragma once
// The differentiable stand-in for the variable-rank cache that gate training runs the frozen model
// over: the same projection and gate as the low-rank cache, with the soft mask instead of the hard cut;
// without a gate, the fixed cut of a nested basis (nested_basis.h).
// Needs LibTorch's autograd front end, like gate_training.cpp, and nothing else does.
#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/layer_cache.h"
#include "core/attention_shape.h"
#include "core/rope.h"

namespace kvc::lowrank {

// One layer's keys or values: basis U and the gate's weights and bias (the trained parameters). Without
// W, the leading `rank` coefficients are kept and U is orthogonal (its inverse is its transpose).
struct GateParams {
  torch::Tensor U, W, b;
  int64_t rank = 0;
};

// Soft masks seen in one forward pass, for R (differentiable) and the hard retain rate at τ.
struct MaskLog {
  std::vector<torch::Tensor> soft_means;
  double hard_sum = 0, hard_count = 0;
  torch::Tensor retain() const { return torch::stack(soft_means).mean(); }
};

// Tensors are collected in lists and concatenated (no in-place writes), so autograd reaches U, W and
// b through the frozen model.
class SoftMaskLayerCache : public LayerCache {
 public:
  SoftMaskLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, const GateParams& k, const GateParams& v,
                     double tau, MaskLog* log);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe&,
                    AttentionStats*) override;
  void retain(const at::Tensor&) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override { return {}; }
  std::string layout() const override { return "gate-training"; }

 private:
  torch::Tensor project(const torch::Tensor& x, const GateParams& g, const torch::Tensor& inv);

  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  GateParams k_, v_;
  torch::Tensor k_inv_, v_inv_;
  double tau_;
  MaskLog* log_;
  std::vector<torch::Tensor> keys_, values_, positions_;
};

}  // namespace kvc::lowrank
