// Ada-KV style head budgets (Feng et al. 2024) around any scorer: each layer's budget (budget × KV
// heads entries) goes to the top-scored entries across all its heads, so heads keep different
// numbers of entries (stored CSR-style). Usage: ada:base=snapkv,window=16,safeguard=0.2 (other keys go
// to the base).
#include "press/press.h"

namespace kvc {

void register_ada() {
  register_method("ada", "per-head budgets: top entries across a layer's heads, around base= (default snapkv)",
                  [](const PressParams& p) {
                    PressParams base = p;
                    base.name = p.get_string("base", "snapkv");
                    base.values.erase("base");
                    base.values.erase("safeguard");
                    KVC_CHECK(base.name != "ada", "--press ada: base cannot be ada");
                    PressConfig c = build_method_config(base);
                    KVC_CHECK(c.allocation == Allocation::Uniform,
                              "--press ada: base={} has its own allocator; use a uniform scorer (snapkv, h2o, tova, "
                              "knorm, random, streaming_llm)", base.name);
                    c.allocation = Allocation::AdaHeads;
                    // safeguard=α: every head keeps at least ⌊α · budget⌋ entries (kvpress' alpha_safeguard).
                    c.ada_safeguard = p.get_double("safeguard", 0.0);
                    KVC_CHECK(c.ada_safeguard >= 0 && c.ada_safeguard <= 1, "--press ada: safeguard must be in [0, 1]");
                    c.bounded = false;  // per-head lengths differ after prefill; decoding is not bounded
                    c.merge = false;
                    return c;
                  });
}

}  // namespace kvc
