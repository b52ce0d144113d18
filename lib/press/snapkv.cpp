// SnapKV (Li et al. 2024): attention of the last `window` prompt queries, 1-D average pooled with
// `kernel`, top-k per KV head; the observation window itself is always kept.
#include "press/press.h"

namespace kvc {
namespace {

class SnapKVScorer : public Scorer {
 public:
  SnapKVScorer(int64_t window, int64_t kernel) : window_(window), kernel_(kernel) {}
  AttentionProbe probe() const override { return {false, window_}; }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor votes = aggregate_heads(in.step->stats.window_probs.sum(1), in.num_kv_heads, in.agg);
    return protect_ends(pool1d(votes, kernel_), 0, window_);
  }

 private:
  int64_t window_, kernel_;
};

}  // namespace

std::shared_ptr<const Scorer> make_snapkv_scorer(int64_t window, int64_t kernel) {
  KVC_CHECK(window >= 1, "--press: window must be >= 1, got {}", window);
  KVC_CHECK(kernel >= 1 && kernel % 2 == 1, "--press: kernel must be odd and >= 1, got {}", kernel);
  return std::make_shared<SnapKVScorer>(window, kernel);
}

void register_snapkv() {
  register_method("snapkv", "window attention of the last prompt tokens, pooled; top-k per head (window=32,kernel=5)",
                  [](const PressParams& p) {
                    p.check_known_keys({"window", "kernel", "agg", "heads"});
                    PressConfig c;
                    c.window = p.get_int("window", 32);
                    c.scorer = make_snapkv_scorer(c.window, p.get_int("kernel", 5));
                    return c;
                  });
}

}  // namespace kvc
