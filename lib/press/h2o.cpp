// H2O (Zhang et al. 2023): heavy hitters by cumulative attention received, plus recent tokens;
// evicts while decoding, accumulating each new query's attention.
#include <cmath>

#include "press/press.h"

namespace kvc {
namespace {

class H2OScorer : public Scorer {
 public:
  explicit H2OScorer(double recent) : recent_(recent) {}
  AttentionProbe probe() const override { return {true, 0}; }
  at::Tensor score(const ScoreInput& in) const override {
    return protect_ends(in.cumulative, 0, std::llround(recent_ * in.budget), in.positions);
  }

 private:
  double recent_;
};

}  // namespace

void register_h2o() {
  register_method("h2o", "cumulative attention (heavy hitters) + recent share, evicts while decoding (recent=0.5)",
                  [](const PressParams& p) {
                    p.check_known_keys({"recent", "agg", "heads"});
                    const double recent = p.get_double("recent", 0.5);
                    KVC_CHECK(recent >= 0 && recent <= 1, "--press h2o: recent is a share of the budget in [0, 1]");
                    PressConfig c;
                    c.scorer = std::make_shared<H2OScorer>(recent);
                    c.bounded = true;
                    c.cumulative = true;
                    return c;
                  });
}

}  // namespace kvc
