// Knorm (Devoto et al. 2024): keys with a low L2 norm attract attention; keep the lowest norms.
#include "press/press.h"

namespace kvc {
namespace {

class KnormScorer : public Scorer {
 public:
  at::Tensor score(const ScoreInput& in) const override {
    // The norm is the same before and after RoPE (a rotation), so the pre-RoPE keys serve.
    return -in.step->keys.to(at::kDouble).norm(2, -1);
  }
};

}  // namespace

void register_knorm() {
  register_method("knorm", "lowest key L2 norm first, at prefill only (Knorm, arXiv:2406.11430)",
                  [](const PressParams& p) {
                    p.check_known_keys({"agg", "heads"});
                    PressConfig c;
                    c.scorer = std::make_shared<KnormScorer>();
                    return c;
                  });
}

}  // namespace kvc
