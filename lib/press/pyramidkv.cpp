// PyramidKV (Cai et al. 2024): SnapKV scores with per-layer budgets decreasing linearly with depth.
#include "press/press.h"

namespace kvc {

void register_pyramidkv() {
  register_method("pyramidkv", "SnapKV scores, layer budgets falling linearly with depth (window=32,kernel=5,beta=20)",
                  [](const PressParams& p) {
                    auto keys = snapkv_keys();
                    keys.insert(keys.end(), {"beta", "schedule", "agg", "heads"});
                    p.check_known_keys(keys);
                    PressConfig c;
                    c.window = p.get_int("window", 32);
                    c.scorer = make_snapkv_scorer(c.window, p);
                    c.allocation = Allocation::Pyramid;
                    c.pyramid_beta = p.get_double("beta", 20);
                    KVC_CHECK(c.pyramid_beta >= 1, "--press pyramidkv: beta must be >= 1");
                    // schedule=kvpress: kvpress' budgets, which count the window inside the linear schedule
                    // and fall back to uniform when the smallest layer budget would be below the window.
                    const std::string schedule = p.get_string("schedule", "window_apart");
                    KVC_CHECK(schedule == "window_apart" || schedule == "kvpress",
                              "--press pyramidkv: schedule must be window_apart or kvpress, got '{}'", schedule);
                    c.pyramid_kvpress_schedule = schedule == "kvpress";
                    return c;
                  });
}

}  // namespace kvc
