// DynamicKV (Zhou et al. 2024): task-aware layer budgets. SnapKV-style window scores per layer; each
// layer first keeps up to B_l = (wt − ws) × r_max plus the window; every m layers (Alg. 1) the global
// top-k over every scored entry of the layers seen so far is counted per layer, scaled to
// B_l × count / max(count) and normalised to (wt − ws) × L in all, capped by what each layer still
// holds. The window is always kept. The allocation logic lives in PressObserver::dynamickv_update.
#include "press/press.h"

namespace kvc {

void register_dynamickv() {
  register_method("dynamickv", "task-aware layer budgets updated every m layers (window=32,kernel=5,m=2,rmax=2)",
                  [](const PressParams& p) {
                    p.check_known_keys({"window", "kernel", "m", "rmax", "agg", "heads"});
                    PressConfig c;
                    c.window = p.get_int("window", 32);
                    c.scorer = make_snapkv_scorer(c.window, p);
                    c.allocation = Allocation::DynamicKV;
                    c.dyn_interval = p.get_int("m", 2);
                    c.dyn_rmax = p.get_double("rmax", 2.0);
                    KVC_CHECK(c.dyn_interval >= 1, "--press dynamickv: m must be >= 1");
                    KVC_CHECK(c.dyn_rmax >= 1, "--press dynamickv: rmax must be >= 1");
                    return c;
                  });
}

}  // namespace kvc
