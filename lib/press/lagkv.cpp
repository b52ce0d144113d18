// LagKV (Liang et al. 2025, arXiv:2504.04704): lag-relative statistics. After `sinks` tokens the prompt is
// cut into partitions of `lag` tokens; each partition is scored against the next one: keys and values
// (as the cache holds them) are min-max normalised per channel by the next partition's range, the
// standard deviation over channels is softmaxed within the partition, and key and value scores are
// averaged. Without cross=1 a score becomes its rank within its partition / lag (every partition then
// keeps about the same share). The sinks and the last partition with the remainder are kept. A prompt
// shorter than sinks + 2·lag is not scored: the sinks and the most recent entries are kept.
// As kvpress' LagKVPress (n_sink = sinks, lag_size = lag, cross_scoring = cross).
#include "press/press.h"

namespace kvc {
namespace {

// x [n_kv, P, lag, d] -> [n_kv, P − 1, lag]: partition p normalised by the range of partition p + 1. A channel
// constant over the next partition (zero range; Gemma 3 has such key channels) counts as 0, where kvpress
// divides by zero and scores the whole partition NaN.
at::Tensor lag_relative(const at::Tensor& x) {
  const int64_t p = x.size(1);
  const at::Tensor ref = x.narrow(1, 1, p - 1), cur = x.narrow(1, 0, p - 1);
  const at::Tensor lo = std::get<0>(ref.min(2, /*keepdim=*/true)), hi = std::get<0>(ref.max(2, /*keepdim=*/true));
  const at::Tensor range = hi - lo;
  const at::Tensor normalised = at::where(range > 0, (cur - lo) / range.clamp_min(1e-300), at::zeros_like(cur));
  return normalised.std(-1, /*unbiased=*/true).softmax(-1);
}

class LagKVScorer : public Scorer {
 public:
  LagKVScorer(int64_t sinks, int64_t lag, bool cross) : sinks_(sinks), lag_(lag), cross_(cross) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k = rotated_keys(in, "lagkv").to(at::kDouble);
    const int64_t kv = k.size(0), s = k.size(1), d = k.size(2);
    const auto opts = k.options();
    if (s < sinks_ + 2 * lag_) {
      // Too short to compare two partitions: recency decides.
      return protect_ends(at::arange(s, opts).unsqueeze(0).expand({kv, s}).contiguous(), sinks_, 0);
    }
    const int64_t parts = (s - sinks_) / lag_, end = sinks_ + parts * lag_, tail = lag_ + s - end;
    const auto partitioned = [&](const at::Tensor& x) {
      return x.narrow(1, sinks_, end - sinks_).reshape({kv, parts, lag_, d});
    };
    const at::Tensor v = in.step->values.to(at::kDouble);
    at::Tensor scores = (lag_relative(partitioned(k)) + lag_relative(partitioned(v))) / 2;  // [n_kv, P − 1, lag]
    if (!cross_) {
      // Each entry's rank within its partition (the order that sorts the sorting order).
      const at::Tensor order = std::get<1>(scores.sort(-1));
      scores = std::get<1>(order.sort(-1)).to(at::kDouble) / static_cast<double>(lag_);
    }
    const at::Tensor scored =
        at::cat({at::zeros({kv, sinks_}, opts), scores.reshape({kv, -1}), at::zeros({kv, tail}, opts)}, 1);
    return protect_ends(scored, sinks_, tail);
  }

 private:
  int64_t sinks_, lag_;
  bool cross_;
};

}  // namespace

void register_lagkv() {
  register_method("lagkv",
                  "keys and values scored against the next partition's range (LagKV, arXiv:2504.04704; "
                  "sinks=4,lag=128,cross=0)",
                  [](const PressParams& p) {
                    p.check_known_keys({"sinks", "lag", "cross", "agg", "heads"});
                    const SpecValues v = p.typed();
                    const int64_t sinks = v.get_count("sinks", 4), lag = v.get_int("lag", 128);
                    KVC_CHECK(lag >= 1, "--press {}: lag must be >= 1 (tokens per partition), got {}", p.name, lag);
                    PressConfig c;
                    c.scorer = std::make_shared<LagKVScorer>(sinks, lag, get_flag(p, "cross", false));
                    return c;
                  });
}

}  // namespace kvc
