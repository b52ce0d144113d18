#pragma once
// MatryoshkaKV-style nested projections (Lin et al., ICLR 2025, arXiv 2410.14731): an orthogonal basis per
// layer and per K/V, trained so that its leading r columns serve as a rank-r cache for every r at once.
// The basis is U = U_pca · C(A): C the Cayley map of a skew-symmetric A, so U stays orthogonal through
// training and starts as the PCA basis itself (A = 0). Each training window cuts every layer's keys and
// values at a rank drawn from a schedule of shares of d_kv (the Matryoshka strategy), and the loss is the
// divergence from the exact model (distillation). Departures from the paper: one basis per layer over all
// KV heads (as kvc-calibrate's bases), where the paper keeps one per head; the rotation is applied after
// the PCA basis instead of the inverse Cayley transform of the PCA basis itself, which the token-wise
// low-rank paper reports producing NaN on Qwen3-8B; no greedy search of per-head ranks (the artifact serves --lowrank's
// ranks= and share=, the latter over the PCA eigenvalues the training started from).
// Needs LibTorch's autograd front end, like gate_training.cpp.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace kvc::lowrank {

// (I + S)^{-1} (I - S) with S = raw - raw^T: orthogonal for any square `raw`, the identity at raw = 0,
// differentiable in raw.
torch::Tensor cayley_rotation(const torch::Tensor& raw);

// The rank a training window cuts one layer's keys (which = 0) or values (which = 1) at: one of
// `shares` (of d, each in (0, 1]), drawn from (seed, step, slot, layer, which) alone, so a resumed run
// draws the same ranks. At least 1.
int64_t nested_rank(const std::vector<double>& shares, int64_t d, uint64_t seed, int64_t step, int64_t slot,
                    int64_t layer, int which);

// The rank `share` of d stands for: round(share · d), at least 1.
int64_t rank_of_share(double share, int64_t d);

}  // namespace kvc::lowrank
