// Merge on evict (kvpress' MergingPress, after token merging, Bolya et al. 2023, and D2O): the base press
// (base=, default snapkv) chooses what stays, and before the rest is dropped each evicted value is folded
// into the kept entry whose key is the most cosine-similar, weighted by that similarity and by the evicted
// value's share of the two values' norms; keys stay as they were (RoPE-safe). A kept entry that receives
// merges becomes (v + Σ w_i v_i) / (1 + Σ w_i). similarity= is the least cosine a merge needs, fraction= the
// share of the evicted entries (the most similar) that merge. Prompt-time only, as kvpress' wrapper.
// Usage: merging:base=knorm,similarity=0.2,fraction=0.75 (other keys go to the base).
#include "cache/kept_record.h"
#include "press/press.h"

namespace kvc {
namespace {

constexpr double kEps = 1e-6;  // kvpress' epsilon in the norms and weights

struct MergeOptions {
  double similarity = 0.0, fraction = 1.0;
};

class MergingAllocator : public Allocator {
 public:
  MergingAllocator(std::unique_ptr<Allocator> base, MergeOptions o) : base_(std::move(base)), o_(o) {}

  void adjust_probe(AttentionProbe& probe) const override { base_->adjust_probe(probe); }
  std::vector<int64_t> layer_bounds(const PressContext& ctx) override { return base_->layer_bounds(ctx); }
  void prefill_layer(PressContext& ctx, const LayerStep& step) override { base_->prefill_layer(ctx, step); }
  void finish_prefill(PressContext& ctx) override { base_->finish_prefill(ctx); }
  bool splits_budget() const override { return base_->splits_budget(); }
  bool merges() const override { return true; }

  void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) override {
    const MergeableRows::Rows rows =
        require_mergeable_rows(cache, "merge evicted values into (merging needs the dense cache)").merge_rows();
    const int64_t kv = rows.keys.size(0), s = rows.keys.size(1), k = kept.size(1), e = s - k;
    if (e <= 0 || k == 0) return;
    const at::ScalarType math = rows.keys.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    at::Tensor evicted_mask = at::ones({kv, s}, kept.options().dtype(at::kBool));
    evicted_mask.scatter_(1, kept, false);
    const at::Tensor evicted = at::arange(s, kept.options()).expand({kv, s}).masked_select(evicted_mask).view({kv, e});
    const auto gather_rows = [&](const at::Tensor& t, const at::Tensor& idx) {
      return t.to(math).gather(1, idx.unsqueeze(-1).expand({kv, idx.size(1), t.size(2)}));
    };
    const auto unit = [](const at::Tensor& x) { return x / x.norm(2, -1, true).clamp_min(kEps); };
    const at::Tensor kept_values = gather_rows(rows.values, kept), evicted_values = gather_rows(rows.values, evicted);
    const at::Tensor sim =
        at::bmm(unit(gather_rows(rows.keys, evicted)), unit(gather_rows(rows.keys, kept)).transpose(1, 2));
    const auto best = sim.max(-1);
    const at::Tensor best_sim = std::get<0>(best), target = std::get<1>(best);  // [kv, e], target: a kept index
    at::Tensor ok = best_sim >= o_.similarity;
    if (o_.fraction < 1.0 && ok.any().item<bool>()) {
      // The most similar `fraction` of each head's evicted entries (kvpress: a quantile over them, the
      // entries below the similarity floor counted as −∞).
      const at::Tensor floor = best_sim.masked_fill(ok.logical_not(), -std::numeric_limits<double>::infinity())
                                   .quantile(1.0 - o_.fraction, -1, true);
      ok = ok.logical_and(best_sim >= floor);
    }
    const at::Tensor target_norm = kept_values.norm(2, -1).gather(1, target);
    const at::Tensor evicted_norm = evicted_values.norm(2, -1);
    const at::Tensor w = best_sim.clamp_min(0) * ok.to(math) * evicted_norm / (evicted_norm + target_norm + kEps);
    const int64_t d = rows.values.size(2);
    const at::Tensor sums =
        at::zeros({kv, k, d}, kept_values.options())
            .scatter_add_(1, target.unsqueeze(-1).expand({kv, e, d}), w.unsqueeze(-1) * evicted_values);
    const at::Tensor weight = at::zeros({kv, k}, kept_values.options()).scatter_add_(1, target, w);
    const at::Tensor received = weight > 0;
    if (!received.any().item<bool>()) return;
    const at::Tensor merged =
        at::where(received.unsqueeze(-1), (kept_values + sums) / (1 + weight).unsqueeze(-1), kept_values);
    rows.values.scatter_(1, kept.unsqueeze(-1).expand({kv, k, d}), merged.to(rows.values.scalar_type()));
    if (record != nullptr) {
      const at::Tensor merges = ok.logical_and(w > 0);
      const at::Tensor head = at::arange(kv, kept.options()).unsqueeze(1).expand({kv, e}).masked_select(merges);
      const at::Tensor slot = kept.gather(1, target).masked_select(merges);
      record->add_merges(layer, at::stack({head, evicted.masked_select(merges), slot}, 1), cache);
    }
  }

 private:
  std::unique_ptr<Allocator> base_;
  MergeOptions o_;
};

PressConfig build(const PressParams& p) {
  const PressParams base = base_press_params(p, "snapkv", {"similarity", "fraction"});
  PressConfig c = build_method_config(base);
  const AllocatorFactory inner = c.allocator ? c.allocator : [] { return std::make_unique<Allocator>(); };
  {
    const auto probe = inner();
    KVC_CHECK(!probe->per_head_budgets() && !probe->merges() && !c.bounded && !c.sizes_itself,
              "--press {}: base={} must keep one count per head at prefill without merging (snapkv, knorm, keydiff, "
              "expected_attention, pyramidkv, ...)",
              p.name, base.name);
  }
  MergeOptions o;
  o.similarity = p.get_double("similarity", 0.0);
  o.fraction = p.get_double("fraction", 1.0);
  KVC_CHECK(o.similarity >= 0 && o.similarity <= 1, "--press {}: similarity must be in [0, 1], got {}", p.name,
            o.similarity);
  KVC_CHECK(o.fraction > 0 && o.fraction <= 1, "--press {}: fraction must be in (0, 1], got {}", p.name, o.fraction);
  c.allocator = [inner, o] { return std::make_unique<MergingAllocator>(inner(), o); };
  return c;
}

}  // namespace

void register_merging() {
  register_method("merging",
                  "a base press whose evicted values fold into their most key-similar kept entry, weighted by "
                  "similarity and value norms (kvpress' MergingPress; base=snapkv,similarity=0,fraction=1)",
                  build);
}

}  // namespace kvc
