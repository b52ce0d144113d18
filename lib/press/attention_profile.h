#pragma once
// Offline attention profile (kvc-profile): per-layer statistics of a model's attention over
// profiling text, and the per-layer budgets the layer-adaptive methods would give, so that
// `--budgets profile.safetensors` applies task-aware budgets cheaply online.
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/llama_model.h"

namespace kvc {

struct ProfileOptions {
  int64_t context = 256;     // tokens per profiling window
  int64_t windows = 4;       // windows (taken consecutively from the text)
  int64_t task_window = 32;  // the last prompt tokens act as task tokens (KVCompose, DynamicKV scores)
  std::vector<double> ratios{0.25, 0.5, 0.75, 0.9};
  bool show_progress = true;

  // Throws kvc::Error naming the flag of the first value that would make an empty or meaningless
  // profile (--windows 0, a ratio outside (0, 1), ...). Needs no model: tools call it before loading.
  void validate() const;
};

struct AttentionProfile {
  at::Tensor layer_variance;            // [L] variance of the cumulative-attention sequence (D2O)
  at::Tensor layer_entropy;             // [L] mean entropy (nats) of the task tokens' attention rows
  at::Tensor d2o_layer_weights;         // [L] inverse-variance softmax (sums to 1)
  at::Tensor ratios;                    // [R]
  at::Tensor kvcompose_retention;       // [R, L] share of each layer's tokens KVCompose keeps
  at::Tensor kvcompose_head_retention;  // [R, L, KV] unstructured variant, per head
  at::Tensor dynamickv_retention;       // [R, L] share kept by DynamicKV's pooled top-k (one update over all layers)
  at::Tensor layer_budget_shares;       // [R, L] share of the total budget per layer (KVCompose; rows sum to 1)
  at::Tensor cumulative_attention;      // [L, context] mean over windows and heads (for the heatmap)
  int64_t windows = 0, context = 0;
};

AttentionProfile profile_attention(const LlamaModel& model, const std::vector<int>& ids, const ProfileOptions& options);

}  // namespace kvc
