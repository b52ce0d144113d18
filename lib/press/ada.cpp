// Ada-KV style head budgets (Feng et al. 2024) around any scorer: each layer's budget (budget × KV
// heads entries) goes to the top-scored entries across all its heads, so heads keep different
// numbers of entries (stored CSR-style). Usage: ada:base=snapkv,window=16,safeguard=0.2 (other keys go
// to the base).
#include <algorithm>

#include "press/press.h"

namespace kvc {
namespace {

class AdaAllocator : public Allocator {
 public:
  explicit AdaAllocator(double safeguard) : safeguard_(safeguard) {}

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    // Ada-KV: the layer's budget goes to the best entries across all its heads.
    const int64_t l = step.layer, KV = ctx.shape().attention.num_kv_heads, budget = ctx.budget();
    const at::Tensor importance = ctx.score(l, &step);
    const int64_t S = importance.size(1);
    // safeguard α: each head first keeps its own top ⌊α · budget⌋ (at least one), then the rest go
    // to the best entries across the layer's heads.
    at::Tensor ranked = importance;
    if (safeguard_ > 0) {
      const int64_t safe = std::max<int64_t>(1, static_cast<int64_t>(budget * safeguard_));
      ranked = importance.clone();
      ranked.scatter_(1, std::get<1>(importance.topk(std::min(safe, S), 1)), 8 * kProtected);
    }
    const at::Tensor chosen = std::get<1>(ranked.reshape({-1}).topk(budget * KV));
    const at::Tensor counts = at::bincount(chosen.div(S, "floor"), {}, KV);
    std::vector<int64_t> keep;
    for (int64_t h = 0; h < KV; ++h) keep.push_back(counts[h].item<int64_t>());
    ctx.compress_per_head(l, importance, keep);
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  double safeguard_;
};

}  // namespace

namespace {

PressConfig build_ada(const PressParams& p) {
  const PressParams base = base_press_params(p, "snapkv", {"safeguard"});
  KVC_CHECK(base.name != "ada" && base.name != "adakv", "--press {}: base cannot be {}", p.name, base.name);
  PressConfig c = build_method_config(base);
  KVC_CHECK(!c.new_allocator()->splits_budget(),
            "--press ada: base={} has its own allocator; use a uniform scorer (snapkv, h2o, tova, "
            "knorm, random, streaming_llm)",
            base.name);
  // safeguard=α: every head keeps at least ⌊α · budget⌋ entries (kvpress' alpha_safeguard).
  const double safeguard = p.get_double("safeguard", 0.0);
  KVC_CHECK(safeguard >= 0 && safeguard <= 1, "--press ada: safeguard must be in [0, 1]");
  // Replaces the base's allocator, and with it any merge (D2O's).
  c.allocator = [safeguard] { return std::make_unique<AdaAllocator>(safeguard); };
  c.bounded = false;  // per-head lengths differ after prefill; decoding is not bounded
  return c;
}

}  // namespace

void register_ada() {
  register_method(
      "ada",
      "per-head budgets: top entries across a layer's heads, around base= (Ada-KV, arXiv:2407.11550; base=snapkv)",
      build_ada);
  // kvpress' name for the same wrapper (AdaKVPress, alpha_safeguard = safeguard).
  register_method("adakv", "alias of ada (kvpress' AdaKVPress)", build_ada);
}

}  // namespace kvc
