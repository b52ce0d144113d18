// CurDKV (Sengupta et al. 2025, arXiv:2509.15038): CUR-style leverage of keys and values approximated by
// their squared norms, normalised within local windows of `window` entries (window=0: over the whole prompt),
// combined as their product (leverage=kv_product), mean (kv_avg), or keys or values alone, normalised to sum
// to 1 per head; the first `sinks` entries are kept. As kvpress' CURPress with its defaults
// (use_random_leverage off; kvc has no random projection).
#include "press/press.h"

namespace kvc {
namespace {

enum class CurLeverage { KvProduct, KvAvg, Key, Value };

class CurScorer : public Scorer {
 public:
  CurScorer(int64_t sinks, int64_t window, CurLeverage leverage)
      : sinks_(sinks), window_(window), leverage_(leverage) {}
  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.step != nullptr && in.step->keys.defined(),
              "--press cur: scores the prompt's own keys and values; it has no prompt step here (layer {})", in.layer);
    // Squared norms do not change under RoPE (a rotation): the keys before it serve.
    at::Tensor k2 = in.step->keys.to(at::kDouble).pow(2).sum(-1), v2 = in.step->values.to(at::kDouble).pow(2).sum(-1);
    if (window_ > 0) {
      k2 = local_share(k2);
      v2 = local_share(v2);
    }
    at::Tensor scores;
    switch (leverage_) {
      case CurLeverage::KvProduct: scores = k2 * v2; break;
      case CurLeverage::KvAvg: scores = (k2 + v2) / 2; break;
      case CurLeverage::Key: scores = k2; break;
      case CurLeverage::Value: scores = v2; break;
    }
    return protect_ends(scores / scores.sum(-1, /*keepdim=*/true), sinks_, 0);
  }

 private:
  // Each entry's share of its window of `window_` consecutive entries (the last window may be shorter).
  at::Tensor local_share(const at::Tensor& x) const {
    const int64_t kv = x.size(0), s = x.size(1), padded = (s + window_ - 1) / window_ * window_;
    const at::Tensor w = at::constant_pad_nd(x, {0, padded - s}).view({kv, -1, window_});
    return (w / w.sum(-1, /*keepdim=*/true)).reshape({kv, padded}).narrow(1, 0, s);
  }

  int64_t sinks_, window_;
  CurLeverage leverage_;
};

}  // namespace

void register_cur() {
  register_method(
      "cur",
      "key and value leverage by squared norms in local windows (CurDKV, arXiv:2509.15038; "
      "sinks=4,window=16,leverage=kv_product)",
      [](const PressParams& p) {
        p.check_known_keys({"sinks", "window", "leverage", "agg", "heads"});
        const SpecValues v = p.typed();
        const int64_t sinks = v.get_count("sinks", 4), window = v.get_count("window", 16);
        const std::string type = v.get_choice("leverage", "kv_product", {"kv_product", "kv_avg", "key", "value"});
        const CurLeverage leverage = type == "kv_avg"  ? CurLeverage::KvAvg
                                     : type == "key"   ? CurLeverage::Key
                                     : type == "value" ? CurLeverage::Value
                                                       : CurLeverage::KvProduct;
        PressConfig c;
        c.scorer = std::make_shared<CurScorer>(sinks, window, leverage);
        return c;
      });
}

}  // namespace kvc
