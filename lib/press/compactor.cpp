// Compactor (Chari & Van Durme 2025, arXiv:2507.08143): the blend of two query-agnostic scores over the
// prompt between `sinks` first and `recent` last tokens (both kept): blend · z(key leverage) +
// z(non-causal chunked attention), each z-normalised over every head. blend defaults to the compression
// ratio (kvpress' default): --ratio, or with --budget 1 − budget / prompt length. The leverage is exact
// (leverage.cpp says how kvpress' sketch differs), the last chunk shorter (non_causal_attention.cpp).
#include <optional>

#include "press/leverage.h"
#include "press/non_causal_attention.h"
#include "press/press.h"

namespace kvc {
namespace {

struct CompactorOptions {
  int64_t sinks = 8, recent = 4, chunk = 256;
  double ridge = 0.01;
  std::optional<double> blend;  // unset: the compression ratio
};

class CompactorScorer : public Scorer {
 public:
  explicit CompactorScorer(CompactorOptions o) : o_(o) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k_rot = rotated_keys(in, "compactor");
    const LayerStep& step = *in.step;
    const int64_t kv = k_rot.size(0), s = k_rot.size(1);
    const int64_t left = std::min(o_.sinks, s), right = std::min(o_.recent, s - left), n = s - left - right;
    const auto opts = k_rot.options().dtype(at::kDouble);
    at::Tensor middle = at::zeros({kv, n}, opts);
    if (n > 0) {
      const double blend = o_.blend ? *o_.blend : 1.0 - static_cast<double>(in.budget) / static_cast<double>(s);
      const at::Tensor leverage = zscore(key_leverage(step.keys.narrow(1, left, n), o_.ridge));
      const at::Tensor attention = zscore(non_causal_attention(
          step.queries.narrow(1, left, n), k_rot.narrow(1, left, n), step.values.narrow(1, left, n), o_.chunk, in.agg));
      middle = blend * leverage + attention;
    }
    return protect_ends(at::cat({at::zeros({kv, left}, opts), middle, at::zeros({kv, right}, opts)}, 1), left, right);
  }

 private:
  CompactorOptions o_;
};

}  // namespace

void register_compactor() {
  register_method("compactor",
                  "blend of key leverage and non-causal chunked attention (Compactor, arXiv:2507.08143; "
                  "sinks=8,recent=4,chunk=256,blend=ratio)",
                  [](const PressParams& p) {
                    p.check_known_keys({"sinks", "recent", "chunk", "ridge", "blend", "agg", "heads"});
                    const SpecValues v = p.typed();
                    CompactorOptions o;
                    o.sinks = v.get_count("sinks", 8);
                    o.recent = v.get_count("recent", 4);
                    o.chunk = v.get_int("chunk", 256);
                    KVC_CHECK(o.chunk >= 1, "--press {}: chunk must be >= 1, got {}", p.name, o.chunk);
                    o.ridge = v.get_nonnegative("ridge", 0.01);
                    if (v.has("blend")) o.blend = v.get_nonnegative("blend", 0.0);
                    else if (p.ratio > 0) o.blend = p.ratio;
                    PressConfig c;
                    c.scorer = std::make_shared<CompactorScorer>(o);
                    return c;
                  });
}

}  // namespace kvc
