// Threshold eviction (kvpress' DMSPress, the inference side of Dynamic Memory Sparsification, arXiv:2506.05345,
// without its trained evictors): the base scorer (base=, default knorm) scores every prompt entry, and an entry
// older than the last `window` tokens is evicted when its score is below `threshold`. How much a head keeps
// depends on the prompt, so heads keep different numbers of entries (the per-head cache layout, as ada) and the
// method runs without --ratio or --budget. kvpress can also evict while decoding (decoding=True); kvc's per-head
// layout does not evict while decoding, so decoding=1 is refused in one line. Usage:
// dms:base=keydiff,threshold=-0.5,window=128 (other keys go to the base).
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class ThresholdAllocator : public Allocator {
 public:
  ThresholdAllocator(std::unique_ptr<Allocator> base, double threshold, int64_t window)
      : base_(std::move(base)), threshold_(threshold), window_(window) {}

  void adjust_probe(AttentionProbe& probe) const override { base_->adjust_probe(probe); }

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer;
    const at::Tensor scores = ctx.score(l, &step).to(at::kDouble);
    const int64_t kv = scores.size(0), s = scores.size(1);
    // Evicted: below the threshold and out of the window (a NaN score is not below it, as in kvpress).
    at::Tensor kept = scores.lt(threshold_).logical_not();
    const int64_t window = std::min(window_, s);
    if (window > 0) kept.narrow(1, s - window, window).fill_(true);
    const at::Tensor counts = kept.sum(1).to(at::kLong).contiguous();
    std::vector<int64_t> keep(counts.data_ptr<int64_t>(), counts.data_ptr<int64_t>() + kv);
    ctx.compress_per_head(l, kept.to(at::kDouble), keep);
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  std::unique_ptr<Allocator> base_;
  double threshold_;
  int64_t window_;
};

PressConfig build(const PressParams& p) {
  KVC_CHECK(p.ratio == 0 && p.budget == 0,
            "--press {}: keeps what scores at least its threshold (threshold=); drop --ratio/--budget", p.name);
  KVC_CHECK(p.values.count("threshold") == 1,
            "--press {}: needs threshold= (entries scoring below it are evicted; its scale is the base scorer's, "
            "e.g. dms:base=keydiff,threshold=-0.5)",
            p.name);
  const PressParams base = base_press_params(p, "knorm", {"threshold", "window", "decoding"});
  KVC_CHECK(!get_flag(p, "decoding", false),
            "--press {}: decoding=1 is not supported: heads keep different numbers of entries after the prompt, "
            "and kvc's per-head cache does not evict while decoding (prompt-time threshold eviction only)",
            p.name);
  PressConfig c = build_method_config(base);
  const auto inner = c.new_allocator();
  KVC_CHECK(!inner->splits_budget() && !c.bounded && !inner->merges() && !c.sizes_itself,
            "--press {}: base={} is not a prompt-time scorer with uniform budgets (use knorm, keydiff, snapkv, "
            "expected_attention, ...)",
            p.name, base.name);
  const double threshold = p.get_double("threshold", 0.0);
  const int64_t window = p.get_int("window", 128);
  KVC_CHECK(window >= 0, "--press {}: window must be >= 0 (recent tokens never evicted), got {}", p.name, window);
  AllocatorFactory factory = c.allocator;
  c.allocator = [factory, threshold, window] {
    return std::make_unique<ThresholdAllocator>(factory ? factory() : std::make_unique<Allocator>(), threshold, window);
  };
  c.sizes_itself = true;
  return c;
}

}  // namespace

void register_dms() {
  register_method("dms",
                  "entries scoring below threshold= evicted, the last window= kept; heads keep what passes "
                  "(kvpress' DMSPress, after DMS, arXiv:2506.05345; base=knorm,threshold= required,window=128)",
                  build, /*sizes_itself=*/true);
}

}  // namespace kvc
