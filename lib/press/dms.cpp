// Threshold eviction (kvpress' DMSPress, the inference side of Dynamic Memory Sparsification, arXiv:2506.05345,
// without its trained evictors): the base scorer (base=, default knorm) scores every prompt entry, and an entry
// older than the last `window` tokens is evicted when its score is below `threshold`. How much a head keeps
// depends on the prompt, so heads keep different numbers of entries (the per-head cache layout, as ada) and the
// method runs without --ratio or --budget. With decoding=1 every later pass goes on the same way, as kvpress'
// decoding=True: its tokens are scored by the base on their own, and each token that leaves the window is
// evicted from the heads where it scored below the threshold. Usage:
// dms:base=keydiff,threshold=-0.5,window=128[,decoding=1] (other keys go to the base).
#include <deque>
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class ThresholdAllocator : public Allocator {
 public:
  ThresholdAllocator(std::unique_ptr<Allocator> base, double threshold, int64_t window, bool decoding)
      : base_(std::move(base)), threshold_(threshold), window_(window), decoding_(decoding) {}

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
    if (!decoding_) return;
    // The window's scores wait for their tokens to leave it.
    pending_.resize(static_cast<size_t>(ctx.shape().num_layers));
    pending_[static_cast<size_t>(l)].clear();
    enqueue(l, scores.narrow(1, s - window, window), step.positions.narrow(0, s - window, window));
  }

  bool evicts_while_decoding() const override { return decoding_; }
  void decode_layer(PressContext& ctx, const LayerStep& step) override {
    enqueue(step.layer, ctx.score_own(step.layer, step), step.positions);
    // The tokens leaving the window go from the heads where they scored below the threshold (a NaN score
    // is not below it, as in kvpress).
    std::deque<PendingToken>& pending = pending_[static_cast<size_t>(step.layer)];
    std::vector<std::vector<int64_t>> gone(static_cast<size_t>(ctx.shape().attention.num_kv_heads));
    bool any = false;
    for (; static_cast<int64_t>(pending.size()) > window_; pending.pop_front()) {
      const PendingToken& token = pending.front();
      for (size_t h = 0; h < token.scores.size(); ++h) {
        if (token.scores[h] < threshold_) {
          gone[h].push_back(token.position);
          any = true;
        }
      }
    }
    if (any) evict_positions(ctx, step.layer, gone);
  }

  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  // A token in the last `window`: its position and its score in each KV head.
  struct PendingToken {
    int64_t position;
    std::vector<double> scores;
  };

  // Appends the tokens of `scores` [n_kv, m] at `positions` [m] to the layer's window, oldest first. The
  // window is kept in plain containers: a decode step adds one token per layer, and tensor operations on
  // such small pieces cost more in dispatch than the step's attention over the cache.
  void enqueue(int64_t layer, const at::Tensor& scores, const at::Tensor& positions) {
    const at::Tensor s = scores.to(at::kDouble).cpu().contiguous();
    const at::Tensor p = positions.to(at::kLong).cpu().contiguous();
    const int64_t kv = s.size(0), m = s.size(1);
    const double* score = s.data_ptr<double>();
    const int64_t* position = p.data_ptr<int64_t>();
    std::deque<PendingToken>& pending = pending_[static_cast<size_t>(layer)];
    for (int64_t t = 0; t < m; ++t) {
      PendingToken token{position[t], std::vector<double>(static_cast<size_t>(kv))};
      for (int64_t h = 0; h < kv; ++h) token.scores[static_cast<size_t>(h)] = score[h * m + t];
      pending.push_back(std::move(token));
    }
  }

  // Drops from each head h the tokens at positions gone[h]. They just left the window, so each is found by
  // searching the head's entries from the newest.
  void evict_positions(PressContext& ctx, int64_t layer, const std::vector<std::vector<int64_t>>& gone) {
    LayerCache& cache = ctx.layer_cache(layer);
    PerHeadLayout* layout = cache.per_head_layout();
    KVC_CHECK(layout != nullptr, "--press dms: decoding=1 needs the per-head cache layout");
    std::vector<at::Tensor> indices;
    for (size_t h = 0; h < gone.size(); ++h) {
      std::vector<int64_t> found;
      if (!gone[h].empty()) {
        const at::Tensor held = layout->entry_positions(static_cast<int64_t>(h)).to(at::kLong).cpu().contiguous();
        const int64_t* positions = held.data_ptr<int64_t>();
        for (const int64_t position : gone[h]) {
          for (int64_t i = held.numel() - 1; i >= 0; --i) {
            if (positions[i] == position) {
              found.push_back(i);
              break;
            }
          }
        }
      }
      indices.push_back(at::tensor(found, at::TensorOptions().dtype(at::kLong)));
    }
    if (auto replacement = layout->erase_per_head(indices)) ctx.replace_layer_cache(layer, std::move(replacement));
  }

  std::unique_ptr<Allocator> base_;
  double threshold_;
  int64_t window_;
  bool decoding_;
  std::vector<std::deque<PendingToken>> pending_;  // per layer, oldest first
};

PressConfig build(const PressParams& p) {
  KVC_CHECK(p.ratio == 0 && p.budget == 0,
            "--press {}: keeps what scores at least its threshold (threshold=); drop --ratio/--budget", p.name);
  KVC_CHECK(p.values.count("threshold") == 1,
            "--press {}: needs threshold= (entries scoring below it are evicted; its scale is the base scorer's, "
            "e.g. dms:base=keydiff,threshold=-0.5)",
            p.name);
  const PressParams base = base_press_params(p, "knorm", {"threshold", "window", "decoding"});
  const bool decoding = get_flag(p, "decoding", false);
  PressConfig c = build_method_config(base);
  // A later pass's tokens are scored on their own: a base that reads attention statistics has none of them.
  KVC_CHECK(!decoding || !c.scorer->probe().any(),
            "--press {}: decoding=1 scores each later token on its own, which base={} cannot (it reads attention "
            "statistics); use a base that scores keys and values (knorm, keydiff, expected_attention, ...)",
            p.name, base.name);
  const auto inner = c.new_allocator();
  KVC_CHECK(!inner->splits_budget() && !c.bounded && !inner->merges() && !c.sizes_itself,
            "--press {}: base={} is not a prompt-time scorer with uniform budgets (use knorm, keydiff, snapkv, "
            "expected_attention, ...)",
            p.name, base.name);
  const double threshold = p.get_double("threshold", 0.0);
  const int64_t window = p.get_int("window", 128);
  KVC_CHECK(window >= 0, "--press {}: window must be >= 0 (recent tokens never evicted), got {}", p.name, window);
  AllocatorFactory factory = c.allocator;
  c.allocator = [factory, threshold, window, decoding] {
    return std::make_unique<ThresholdAllocator>(factory ? factory() : std::make_unique<Allocator>(), threshold, window,
                                                decoding);
  };
  c.sizes_itself = true;
  return c;
}

}  // namespace

void register_dms() {
  register_method("dms",
                  "entries scoring below threshold= evicted, the last window= kept; heads keep what passes, also "
                  "while decoding with decoding=1 (kvpress' DMSPress, after DMS, arXiv:2506.05345; base=knorm,"
                  "threshold= required,window=128,decoding=0)",
                  build, /*sizes_itself=*/true);
}

}  // namespace kvc
