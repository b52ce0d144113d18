// What scorers read of the model beyond attention statistics: the keys and queries in the frame the
// scorer needs (rotated as the cache holds them, or before RoPE), and the shared normalisation.
#include <algorithm>

#include "core/rope.h"
#include "press/press.h"
#include "util/error.h"

namespace kvc {
namespace {

const LayerStep& step_with_rope(const ScoreInput& in, const std::string& press) {
  KVC_CHECK(in.step != nullptr && in.step->keys.defined(),
            "--press {}: scores the prompt's own keys and queries; it has no prompt step here (layer {})", press,
            in.layer);
  KVC_CHECK(in.step->rope != nullptr, "--press {}: the model gave layer {} no RoPE to rotate keys with", press,
            in.layer);
  return *in.step;
}

}  // namespace

at::Tensor rotated_keys(const ScoreInput& in, const std::string& press) {
  const LayerStep& s = step_with_rope(in, press);
  return s.rope->apply(s.keys.contiguous(), s.positions);
}

at::Tensor prerope_queries(const ScoreInput& in, const std::string& press) {
  const LayerStep& s = step_with_rope(in, press);
  KVC_CHECK(s.queries.defined(), "--press {}: the model gave layer {} no queries", press, in.layer);
  return s.rope->unapply(s.queries.contiguous(), s.positions);
}

at::Tensor zscore(const at::Tensor& x) {
  const at::Tensor d = x.to(at::kDouble);
  if (d.numel() < 2) return at::zeros_like(d);
  return (d - d.mean()) / d.std(/*unbiased=*/true).clamp_min(1e-6);
}

bool get_flag(const PressParams& p, const std::string& key, bool fallback) {
  return p.typed().get_choice(key, fallback ? "1" : "0", {"0", "1"}) == "1";
}

}  // namespace kvc
