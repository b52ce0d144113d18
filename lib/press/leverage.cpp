// LeverageScore (Chari & Van Durme 2025, arXiv:2507.08143): keys that are geometric outliers (high
// statistical leverage among the prompt's keys, before RoPE) are kept. kvpress' LeverageScorePress
// estimates the leverage through a random Gaussian sketch of 48 columns with a Cholesky jitter of 0.01;
// kvc computes it exactly with that jitter as a ridge (`ridge`), which is cheap at head sizes (a d × d
// solve per head) and needs no random state.
#include "press/leverage.h"

#include "press/press.h"

namespace kvc {

at::Tensor key_leverage(const at::Tensor& keys, double ridge) {
  const at::Tensor k = keys.to(at::kDouble);
  const at::Tensor x = k - k.mean(1, /*keepdim=*/true);  // [n_kv, S, d]
  const int64_t d = x.size(2);
  const at::Tensor gram = at::matmul(x.transpose(1, 2), x) + ridge * at::eye(d, x.options());  // [n_kv, d, d]
  const at::Tensor solved = at::linalg_solve(gram, x.transpose(1, 2));  // (XᵀX + λI)⁻¹ Xᵀ
  return (x.transpose(1, 2) * solved).sum(1).clamp_min(0);
}

namespace {

class LeverageScorer : public Scorer {
 public:
  explicit LeverageScorer(double ridge) : ridge_(ridge) {}
  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.step != nullptr && in.step->keys.defined(),
              "--press leverage: scores the prompt's own keys; it has no prompt step here (layer {})", in.layer);
    // kvpress z-normalises over all heads: the same order per head.
    return zscore(key_leverage(in.step->keys, ridge_));
  }

 private:
  double ridge_;
};

}  // namespace

void register_leverage() {
  register_method("leverage",
                  "keys with the highest statistical leverage, before RoPE (Compactor's geometric "
                  "score, arXiv:2507.08143; ridge=0.01)",
                  [](const PressParams& p) {
                    p.check_known_keys({"ridge", "agg", "heads"});
                    const double ridge = p.typed().get_nonnegative("ridge", 0.01);
                    PressConfig c;
                    c.scorer = std::make_shared<LeverageScorer>(ridge);
                    return c;
                  });
}

}  // namespace kvc
