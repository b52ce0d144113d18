// SnapKV (Li et al. 2024): attention of the last `window` prompt queries, 1-D average pooled with
// `kernel`, top-k per KV head; the observation window itself is always kept.
#include "press/press.h"

namespace kvc {
namespace {

class SnapKVScorer : public Scorer {
 public:
  SnapKVScorer(int64_t window, SnapKVPooling pooling) : window_(window), pooling_(pooling) {}
  AttentionProbe probe() const override { return {false, window_}; }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor votes = aggregate_heads(in.step->stats.window_probs.sum(1), in.num_kv_heads, in.agg);
    at::Tensor pooled;
    if (pooling_.window_pooled) {
      pooled = pool1d(votes, pooling_.kernel, pooling_.zero_padding);
    } else {
      // Only the entries before the window are pooled (the window's own columns do not leak into
      // their neighbours' scores); the window is protected below anyway.
      const int64_t s = votes.size(1), scored = std::max<int64_t>(0, s - window_);
      pooled = at::cat({pool1d(votes.narrow(1, 0, scored).contiguous(), pooling_.kernel, pooling_.zero_padding),
                        votes.narrow(1, scored, s - scored)},
                       1);
    }
    return protect_ends(pooled, 0, window_);
  }

 private:
  int64_t window_;
  SnapKVPooling pooling_;
};

}  // namespace

std::vector<std::string> snapkv_keys() { return {"window", "kernel", "pad", "pool"}; }

std::shared_ptr<const Scorer> make_snapkv_scorer(int64_t window, const PressParams& p) {
  SnapKVPooling pooling;
  pooling.kernel = p.get_int("kernel", 5);
  KVC_CHECK(window >= 1, "--press {}: window must be >= 1, got {}", p.name, window);
  KVC_CHECK(pooling.kernel >= 1 && pooling.kernel % 2 == 1, "--press {}: kernel must be odd and >= 1, got {}", p.name,
            pooling.kernel);
  // pad=zeros: the pooling's edges average over zero padding (kvpress) instead of the entries that exist.
  const std::string pad = p.get_string("pad", "edge");
  KVC_CHECK(pad == "edge" || pad == "zeros", "--press {}: pad must be edge or zeros, got '{}'", p.name, pad);
  pooling.zero_padding = pad == "zeros";
  // pool=context: pool only the entries before the window (kvpress); pool=all includes the window's columns.
  const std::string pool = p.get_string("pool", "all");
  KVC_CHECK(pool == "all" || pool == "context", "--press {}: pool must be all or context, got '{}'", p.name, pool);
  pooling.window_pooled = pool == "all";
  return std::make_shared<SnapKVScorer>(window, pooling);
}

void register_snapkv() {
  register_method("snapkv",
                  "window attention of the last prompt tokens, pooled; top-k per head (SnapKV, arXiv:2404.14469; "
                  "window=32,kernel=5)",
                  [](const PressParams& p) {
                    auto keys = snapkv_keys();
                    keys.insert(keys.end(), {"agg", "heads"});
                    p.check_known_keys(keys);
                    PressConfig c;
                    c.scorer = make_snapkv_scorer(p.get_int("window", 32), p);
                    return c;
                  });
}

}  // namespace kvc
