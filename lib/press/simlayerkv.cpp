// SimLayerKV (Zhang et al. 2024, arXiv:2410.13846): a "lazy" layer is one whose last queries attend mostly to
// the first tokens and the recent ones; it keeps only those, the other layers keep everything. As kvpress'
// SimLayerKVPress: the attention of the last `last` queries (softmax over the whole prompt), averaged over
// query heads and those queries, summed over the first `sinks` and the `recent` entries before the queries
// themselves; above `threshold` the layer keeps its first `sinks` and last recent − last entries (kvpress'
// slice keys[-recent + last:]). A prompt of sinks + recent + last tokens or fewer is kept whole. The method
// sets its own size (no --ratio).
#include "press/press.h"

namespace kvc {
namespace {

struct SimLayerOptions {
  double threshold = 1.0;
  int64_t last = 1, recent = 1024, sinks = 4;
};

// What a lazy layer keeps: its first `sinks` and last recent − last entries.
class SimLayerScorer : public Scorer {
 public:
  explicit SimLayerScorer(SimLayerOptions o) : o_(o) {}
  AttentionProbe probe() const override { return {false, o_.last}; }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor zeros = at::zeros(in.positions.sizes(), in.positions.options().dtype(at::kDouble));
    return protect_ends(zeros, o_.sinks, o_.recent - o_.last, in.positions);
  }

 private:
  SimLayerOptions o_;
};

class SimLayerAllocator : public Allocator {
 public:
  explicit SimLayerAllocator(SimLayerOptions o) : o_(o) {}

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer, S = ctx.prompt_length();
    if (S <= o_.sinks + o_.recent + o_.last || o_.threshold >= 1.0) return;
    KVC_CHECK(step.stats.window_probs.defined(), "--press simlayerkv: layer {} has no window attention", l);
    // [H, w, S] -> mean over heads and queries, the queries' own columns left out.
    const at::Tensor w = step.stats.window_probs;
    const at::Tensor mean =
        w.narrow(1, w.size(1) - o_.last, o_.last).to(at::kDouble).mean(at::IntArrayRef{0, 1}).narrow(0, 0, S - o_.last);
    const double mass = mean.narrow(0, 0, o_.sinks).sum().item<double>() +
                        mean.narrow(0, S - o_.last - o_.recent, o_.recent).sum().item<double>();
    if (mass <= o_.threshold) return;
    const int64_t keep = o_.sinks + o_.recent - o_.last;
    ctx.set_bound(l, keep);
    ctx.compress(l, ctx.score(l, &step), keep);
  }
  bool splits_budget() const override { return true; }

 private:
  SimLayerOptions o_;
};

PressConfig build(const PressParams& p) {
  p.check_known_keys({"threshold", "last", "recent", "sinks", "agg", "heads"});
  KVC_CHECK(p.ratio == 0 && p.budget == 0,
            "--press {}: keeps what its lazy layers need (threshold=); drop --ratio/--budget", p.name);
  SimLayerOptions o;
  o.threshold = p.get_double("threshold", 1.0);
  KVC_CHECK(o.threshold >= 0 && o.threshold <= 1, "--press {}: threshold must be in [0, 1], got {}", p.name,
            o.threshold);
  o.last = p.get_int("last", 1);
  o.recent = p.get_int("recent", 1024);
  o.sinks = p.get_int("sinks", 4);
  KVC_CHECK(o.last >= 1, "--press {}: last must be >= 1, got {}", p.name, o.last);
  KVC_CHECK(o.recent > o.last, "--press {}: recent must exceed last ({}), got {}", p.name, o.last, o.recent);
  KVC_CHECK(o.sinks >= 0, "--press {}: sinks must be >= 0, got {}", p.name, o.sinks);
  PressConfig c;
  c.scorer = std::make_shared<SimLayerScorer>(o);
  c.sizes_itself = true;
  c.allocator = [o] { return std::make_unique<SimLayerAllocator>(o); };
  return c;
}

}  // namespace

void register_simlayerkv() {
  register_method("simlayerkv",
                  "lazy layers (last queries' attention on sinks + recent above threshold) keep only those "
                  "(SimLayerKV, arXiv:2410.13846; threshold=1 as kvpress: set it (0.9 Llama 3, 0.65 Llama "
                  "2),last=1,recent=1024,sinks=4)",
                  build, /*sizes_itself=*/true);
}

}  // namespace kvc
