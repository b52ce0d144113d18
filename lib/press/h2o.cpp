// H2O (Zhang et al. 2023): heavy hitters by cumulative attention received, plus recent tokens;
// evicts while decoding, accumulating each new query's attention.
#include <cmath>

#include "press/press.h"

namespace kvc {
namespace {

class H2OScorer : public Scorer {
 public:
  H2OScorer(double recent, bool average) : recent_(recent), average_(average) {}
  AttentionProbe probe() const override { return {true, 0}; }
  at::Tensor score(const ScoreInput& in) const override {
    at::Tensor received = in.cumulative;
    if (average_) {
      // Mean instead of sum: an entry at position p has been seen by (newest position + 1 − p) queries,
      // so early entries are not favoured merely for having been seen more often.
      const at::Tensor pos = in.positions.to(at::kDouble);
      received = received / (std::get<0>(pos.max(1, /*keepdim=*/true)) + 1 - pos);
    }
    return protect_ends(received, 0, std::llround(recent_ * in.budget), in.positions);
  }

 private:
  double recent_;
  bool average_;
};

}  // namespace

void register_h2o() {
  register_method(
      "h2o",
      "cumulative attention (heavy hitters) + recent share, evicts while decoding (H2O, arXiv:2306.14048; recent=0.5)",
      [](const PressParams& p) {
        p.check_known_keys({"recent", "average", "agg", "heads"});
        const double recent = p.get_double("recent", 0.5);
        KVC_CHECK(recent >= 0 && recent <= 1, "--press h2o: recent is a share of the budget in [0, 1]");
        PressConfig c;
        // average=1: attention received divided by the queries that saw the entry (kvpress'
        // ObservedAttention); the paper sums it.
        c.scorer = std::make_shared<H2OScorer>(recent, p.get_int("average", 0) != 0);
        c.bounded = true;
        c.cumulative = true;
        return c;
      });
}

}  // namespace kvc
