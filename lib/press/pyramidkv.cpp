// PyramidKV (Cai et al. 2024): SnapKV scores with per-layer budgets decreasing linearly with depth.
#include "press/press.h"

namespace kvc {

void register_pyramidkv() {
  register_method("pyramidkv", "SnapKV scores, layer budgets falling linearly with depth (window=32,kernel=5,beta=20)",
                  [](const PressParams& p) {
                    p.check_known_keys({"window", "kernel", "beta", "agg", "heads"});
                    PressConfig c;
                    c.window = p.get_int("window", 32);
                    c.scorer = make_snapkv_scorer(c.window, p.get_int("kernel", 5));
                    c.allocation = Allocation::Pyramid;
                    c.pyramid_beta = p.get_double("beta", 20);
                    KVC_CHECK(c.pyramid_beta >= 1, "--press pyramidkv: beta must be >= 1");
                    return c;
                  });
}

}  // namespace kvc
