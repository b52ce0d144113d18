// KeyDiff (Park et al. 2025, arXiv:2504.15364): keys that differ most from the layer's average key
// direction carry the distinctive information; score = −cos(k_i, anchor), anchor = the mean of the
// L2-normalised keys of the head. Keys as the cache holds them (after RoPE), as kvpress scores them.
// The paper compresses block by block as the prompt streams in; this press scores the whole prompt at once
// (kvpress' KeyDiffPress; its BlockPress wrapper gives the paper's blocks).
#include "press/press.h"

namespace kvc {
namespace {

class KeyDiffScorer : public Scorer {
 public:
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k = rotated_keys(in, "keydiff").to(at::kDouble);  // [n_kv, S, d]
    const at::Tensor norms = k.norm(2, -1, /*keepdim=*/true);
    const at::Tensor anchor = (k / norms.clamp_min(1e-12)).mean(1, /*keepdim=*/true);  // [n_kv, 1, d]
    const at::Tensor anchor_norm = anchor.norm(2, -1, /*keepdim=*/true);
    // cosine_similarity as torch computes it: x·y / (max(‖x‖, ε) · max(‖y‖, ε)), ε = 1e-8.
    const at::Tensor cos = (k * anchor).sum(-1) / (norms.clamp_min(1e-8) * anchor_norm.clamp_min(1e-8)).squeeze(-1);
    return -cos;
  }
};

}  // namespace

void register_keydiff() {
  register_method("keydiff", "keys least similar to the mean key direction (KeyDiff, arXiv:2504.15364)",
                  [](const PressParams& p) {
                    p.check_known_keys({"agg", "heads"});
                    PressConfig c;
                    c.scorer = std::make_shared<KeyDiffScorer>();
                    return c;
                  });
}

}  // namespace kvc
