#include "press/press.h"

namespace kvc {
namespace {

class FrontLoaded : public Allocator {
 public:
  std::vector<int64_t> layer_bounds(const PressContext& ctx) override {
    const int64_t L = ctx.shape().num_layers;
    std::vector<double> weights;
    for (int64_t l = 0; l < L; ++l) weights.push_back(l < L / 2 ? 3.0 : 1.0);
    const std::vector<int64_t> lo(static_cast<size_t>(L), 1), hi(static_cast<size_t>(L), ctx.prompt_length());
    return distribute(weights, ctx.budget() * L, lo, hi);
  }
  bool splits_budget() const override { return true; }
};

}  // namespace

void register_front_loaded() {
  register_method("front_loaded", "SnapKV scores; the first half of the layers keeps 3x the second's",
                  [](const PressParams& p) {
                    p.check_known_keys({"window", "agg", "heads"});
                    PressConfig c;
                    c.scorer = make_snapkv_scorer(p.get_int("window", 32), p);
                    c.allocator = [] { return std::make_unique<FrontLoaded>(); };
                    return c;
                  });
}

}  // namespace kvc
