// CriticalKV (Feng et al. 2025, arXiv:2502.03805) around a prompt-time scorer (base=, default snapkv): an
// entry matters by the attention it gets and by how far its value can move the output, ‖W_o v‖₁ through
// each query head's slice of the output projection (projected_values.h). Two stages: the base scorer's top
// ⌊first_stage · budget⌋ entries (at least one) are kept outright; the rest of the budget goes to the best
// (score + epsilon) · ‖W_o v‖₁. Entries the base protects (windows, sinks) stay protected. As kvpress'
// CriticalKVPress (first_stage = first_stage_ratio). Usage: criticalkv:base=snapkv,window=16 (other keys go to
// the base). kvpress' SnapKV averages the window's attention where kvc's sums it, so epsilon there is kvc's
// epsilon / window. criticalkv_ada: the same stages within Ada-KV's per-head budgets (CriticalAdaKV).
#include <algorithm>
#include <cmath>
#include <vector>

#include "press/press.h"
#include "press/projected_values.h"

namespace kvc {
namespace {

// CriticalKV's two stages on one layer: `base` [n_kv, S] the base scores, `first[h]` the entries head h keeps
// by its base score alone. Protected base entries stay protected; the first stage's become protected; the
// rest score (base + epsilon) · ‖W_o v‖₁.
at::Tensor two_stage_scores(const at::Tensor& base, const LayerStep* step, int64_t layer, int64_t num_heads,
                            const std::vector<int64_t>& first, double epsilon) {
  KVC_CHECK(step != nullptr && step->values.defined() && step->output_projection != nullptr,
            "--press criticalkv: needs the prompt's values and the layer's output projection (layer {})", layer);
  const at::Tensor norms = projected_value_norms(*step->output_projection, step->values, num_heads);
  const at::Tensor is_protected = base >= kProtected;
  at::Tensor out = at::where(is_protected, base, (base + epsilon) * norms);
  at::Tensor chosen = at::zeros_like(is_protected);
  for (int64_t h = 0; h < base.size(0); ++h) {
    const int64_t n = std::min(first[static_cast<size_t>(h)], base.size(1));
    if (n > 0) chosen[h].index_fill_(0, std::get<1>(base[h].topk(n)), true);
  }
  return at::where(chosen.logical_and(is_protected.logical_not()), at::full_like(out, kProtected), out);
}

// ⌊share · n⌋, at least one when share > 0 (kvpress' floor for short contexts).
int64_t first_stage_count(double share, int64_t n) {
  const auto count = static_cast<int64_t>(std::floor(share * static_cast<double>(n)));
  return share > 0 ? std::max<int64_t>(count, 1) : 0;
}

class CriticalKVScorer : public Scorer {
 public:
  CriticalKVScorer(std::shared_ptr<const Scorer> base, double epsilon, double first_stage)
      : base_(std::move(base)), epsilon_(epsilon), first_stage_(first_stage) {}
  AttentionProbe probe() const override { return base_->probe(); }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor base = base_->score(in).to(at::kDouble);
    const std::vector<int64_t> first(static_cast<size_t>(base.size(0)), first_stage_count(first_stage_, in.budget));
    return two_stage_scores(base, in.step, in.layer, in.num_heads, first, epsilon_);
  }

 private:
  std::shared_ptr<const Scorer> base_;
  double epsilon_, first_stage_;
};

// CriticalAdaKV: Ada-KV's head budgets from the base scores (each head first keeps its top ⌊safeguard ·
// budget⌋, then the layer's budget goes to the best base scores across heads), then CriticalKV's two stages
// within each head's budget (kvpress' CriticalAdaKVPress).
class CriticalAdaAllocator : public Allocator {
 public:
  CriticalAdaAllocator(double safeguard, double epsilon, double first_stage)
      : safeguard_(safeguard), epsilon_(epsilon), first_stage_(first_stage) {}
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer, kv = ctx.shape().attention.num_kv_heads, budget = ctx.budget();
    const at::Tensor base = ctx.score(l, &step).to(at::kDouble);
    const int64_t s = base.size(1);
    at::Tensor ranked = base.clone();
    if (safeguard_ > 0) {
      const int64_t safe = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(budget) * safeguard_));
      ranked.scatter_(1, std::get<1>(base.topk(std::min(safe, s), 1)), 8 * kProtected);
    }
    const at::Tensor chosen = std::get<1>(ranked.reshape({-1}).topk(std::min(budget * kv, kv * s)));
    const at::Tensor counts = at::bincount(chosen.div(s, "floor"), {}, kv).to(at::kCPU, at::kLong).contiguous();
    const std::vector<int64_t> keep(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + kv);
    std::vector<int64_t> first;
    for (int64_t k : keep) first.push_back(static_cast<int64_t>(static_cast<double>(k) * first_stage_));
    const at::Tensor scores = two_stage_scores(ranked, &step, l, ctx.shape().attention.num_heads, first, epsilon_);
    ctx.compress_per_head(l, scores, keep);
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  double safeguard_, epsilon_, first_stage_;
};

}  // namespace

namespace {

PressConfig build(const PressParams& p, bool ada) {
  const PressParams base = base_press_params(p, "snapkv", {"epsilon", "first_stage", "safeguard"});
  KVC_CHECK(base.name != "criticalkv" && base.name != "criticalkv_ada" && base.name != "ada",
            "--press {}: base cannot be {} (use a scorer such as snapkv, expected_attention)", p.name, base.name);
  PressConfig c = build_method_config(base);
  KVC_CHECK(!c.new_allocator()->splits_budget(),
            "--press {}: base={} has its own allocator; use a uniform scorer (snapkv, expected_attention, keydiff, "
            "knorm, ...)",
            p.name, base.name);
  KVC_CHECK(!c.bounded,
            "--press {}: base={} evicts while decoding, and CriticalKV rescores the prompt once; use a prompt-time "
            "scorer (snapkv, expected_attention, keydiff, knorm, ...)",
            p.name, base.name);
  const SpecValues v = p.typed();
  const double epsilon = v.get_nonnegative("epsilon", 1e-4);
  const double first_stage = v.get_nonnegative("first_stage", 0.5);
  KVC_CHECK(first_stage <= 1, "--press {}: first_stage is a share of the budget in [0, 1], got {}", p.name,
            first_stage);
  if (!ada) {
    KVC_CHECK(!v.has("safeguard"), "--press {}: safeguard belongs to criticalkv_ada (per-head budgets)", p.name);
    c.scorer = std::make_shared<CriticalKVScorer>(c.scorer, epsilon, first_stage);
    return c;
  }
  const double safeguard = v.get_nonnegative("safeguard", 0.2);
  KVC_CHECK(safeguard <= 1, "--press {}: safeguard must be in [0, 1], got {}", p.name, safeguard);
  c.allocator = [safeguard, epsilon, first_stage] {
    return std::make_unique<CriticalAdaAllocator>(safeguard, epsilon, first_stage);
  };
  return c;
}

}  // namespace

void register_criticalkv() {
  register_method("criticalkv",
                  "base scores refined by ||W_o v||_1, two-stage selection around base= (default snapkv) "
                  "(CriticalKV, arXiv:2502.03805; epsilon=1e-4,first_stage=0.5)",
                  [](const PressParams& p) { return build(p, /*ada=*/false); });
  register_method("criticalkv_ada",
                  "CriticalKV within Ada-KV head budgets from the base scores (CriticalAdaKV, arXiv:2502.03805; "
                  "safeguard=0.2)",
                  [](const PressParams& p) { return build(p, /*ada=*/true); });
}

}  // namespace kvc
