// TOVA (Oren et al. 2024): evict the entry the current (newest) query attends to least.
#include "press/press.h"

namespace kvc {
namespace {

class TovaScorer : public Scorer {
 public:
  AttentionProbe probe() const override { return {false, 1}; }
  at::Tensor score(const ScoreInput& in) const override {
    return protect_ends(in.current, 0, 1, in.positions);  // the newest token is the query itself
  }
};

}  // namespace

void register_tova() {
  register_method("tova",
                  "attention of the newest query, evicts the least attended while decoding (TOVA, arXiv:2401.06104)",
                  [](const PressParams& p) {
                    p.check_known_keys({"agg", "heads"});
                    PressConfig c;
                    c.scorer = std::make_shared<TovaScorer>();
                    c.bounded = true;
                    c.current = true;
                    return c;
                  });
}

}  // namespace kvc
