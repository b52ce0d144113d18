// Expected Attention (Devoto et al. 2025, arXiv:2510.00636): the attention future queries are expected to
// pay each key, from a Gaussian model of the queries. The mean μ and covariance Σ of the prompt's queries
// before RoPE (the first `sinks` excluded; window=N: the last N only) are rotated by RoPE averaged over the
// next `future` positions (R̄); for q ~ N(R̄μ, R̄ΣR̄ᵀ), E[exp(q·k/√d)] ∝ exp(k·R̄μ/√d + kᵀR̄ΣR̄ᵀk / 2d),
// normalised over the keys (softmax), averaged over a KV head's query heads, then (score + epsilon) · ‖v‖.
// The sinks are kept. Parameters as kvpress' ExpectedAttentionPress: sinks = n_sink, future =
// n_future_positions, covariance = use_covariance, vnorm = use_vnorm, epsilon.
#include <cmath>

#include "press/average_rope.h"
#include "press/press.h"

namespace kvc {
namespace {

struct ExpectedAttentionOptions {
  int64_t sinks = 4, future = 512, window = 0;
  bool covariance = true, vnorm = true;
  double epsilon = 0.0;
};

class ExpectedAttentionScorer : public Scorer {
 public:
  explicit ExpectedAttentionScorer(ExpectedAttentionOptions o) : o_(o) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k_all = rotated_keys(in, "expected_attention").to(at::kDouble);  // [n_kv, S, d]
    const int64_t kv = k_all.size(0), s = k_all.size(1), d = k_all.size(2);
    const int64_t sinks = std::min(o_.sinks, s);
    if (s - sinks < 1) return protect_ends(at::zeros({kv, s}, k_all.options()), sinks, 0);
    // The query statistics: every query after the sinks (kvpress), or the last `window`.
    const at::Tensor q_all = prerope_queries(in, "expected_attention").to(at::kDouble);  // [H, S, d]
    const int64_t h = q_all.size(0), n_q = o_.window > 0 ? std::min(o_.window, s - sinks) : s - sinks;
    const at::Tensor q = q_all.narrow(1, s - n_q, n_q);
    const at::Tensor mu = q.mean(1);  // [H, d]
    const int64_t next = in.step->positions[s - 1].item<int64_t>() + 1;
    const at::Tensor r = average_rotation(*in.step->rope, next, o_.future).to(q.device());  // [d, d]
    const at::Tensor mu_r = at::matmul(mu, r.t());                                          // R̄μ per head
    // Keys of query head i: its KV head's (grouped-query attention).
    const at::Tensor k = k_all.narrow(1, sinks, s - sinks).repeat_interleave(h / kv, 0);  // [H, n, d]
    at::Tensor logits = at::matmul(k, mu_r.unsqueeze(-1)).squeeze(-1) / std::sqrt(static_cast<double>(d));
    if (o_.covariance) {
      const at::Tensor centered = q - mu.unsqueeze(1);
      const at::Tensor cov = at::matmul(centered.transpose(1, 2), centered) / static_cast<double>(n_q);  // biased
      const at::Tensor cov_r = at::matmul(at::matmul(r, cov), r.t());                                    // R̄ΣR̄ᵀ
      logits = logits + (at::matmul(k, cov_r) * k).sum(-1) / static_cast<double>(d) / 2.0;
    }
    at::Tensor scores = aggregate_heads(at::softmax(logits, -1), kv, in.agg);  // [n_kv, n]
    if (o_.vnorm) {
      const at::Tensor v = in.step->values.to(at::kDouble).narrow(1, sinks, s - sinks);
      scores = (scores + o_.epsilon) * v.norm(2, -1);
    }
    return protect_ends(at::cat({at::zeros({kv, sinks}, scores.options()), scores}, 1), sinks, 0);
  }

 private:
  ExpectedAttentionOptions o_;
};

}  // namespace

void register_expected_attention() {
  register_method(
      "expected_attention",
      "attention expected from the prompt queries' mean and covariance, RoPE averaged over future positions, "
      "times ||v|| (Expected Attention, arXiv:2510.00636; sinks=4,future=512,covariance=1,vnorm=1,epsilon=0)",
      [](const PressParams& p) {
        p.check_known_keys({"sinks", "future", "window", "covariance", "vnorm", "epsilon", "agg", "heads"});
        ExpectedAttentionOptions o;
        const SpecValues v = p.typed();
        o.sinks = v.get_count("sinks", 4);
        o.future = v.get_int("future", 512);
        KVC_CHECK(o.future >= 1, "--press {}: future must be >= 1 (positions the RoPE is averaged over), got {}",
                  p.name, o.future);
        o.window = v.get_count("window", 0);
        o.covariance = get_flag(p, "covariance", true);
        o.vnorm = get_flag(p, "vnorm", true);
        o.epsilon = v.get_nonnegative("epsilon", 0.0);
        PressConfig c;
        c.scorer = std::make_shared<ExpectedAttentionScorer>(o);
        return c;
      });
}

}  // namespace kvc
