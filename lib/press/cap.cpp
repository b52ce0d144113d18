// CAPKV (arXiv:2604.25975), as kvpress' CapPress: keep the entries that add the most capacity to what the
// head can still express for the queries it expects. Query-key alignment w_i = exp(τ (cos(k_i, μ_q) − max)),
// μ_q the mean of the prompt's queries after the sinks, taken before RoPE and rotated by RoPE averaged over
// the next `future` positions (average_rope.h); capacity matrix A = I + Σ_i (w_i + ε) v_i v_iᵀ over the
// entries after the sinks; score s_i = w_i · v_iᵀ A⁻¹ v_i, per query head, averaged over a KV head's query
// heads. The `sinks` first entries are kept. Keys as the cache holds them (after RoPE).
#include "press/average_rope.h"
#include "press/press.h"

namespace kvc {
namespace {

struct CapOptions {
  double tau = 5.0, epsilon = 1e-6;
  int64_t future = 512, sinks = 4;
};

at::Tensor unit(const at::Tensor& x) { return x / x.norm(2, -1, /*keepdim=*/true).clamp_min(1e-12); }

class CapScorer : public Scorer {
 public:
  explicit CapScorer(CapOptions o) : o_(o) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k_all = rotated_keys(in, "cap").to(at::kDouble);
    const int64_t kv = k_all.size(0), s = k_all.size(1), d = k_all.size(2);
    const int64_t sinks = std::min(o_.sinks, s), n = s - sinks;
    if (n < 1) return protect_ends(at::zeros({kv, s}, k_all.options()), sinks, 0);
    const at::Tensor q = prerope_queries(in, "cap").to(at::kDouble).narrow(1, sinks, n);  // [H, n, d]
    const int64_t h = q.size(0);
    const int64_t next = in.step->positions[s - 1].item<int64_t>() + 1;
    const at::Tensor r = average_rotation(*in.step->rope, next, o_.future).to(q.device());
    const at::Tensor anchor = at::matmul(q, r.t()).mean(1);                                                 // [H, d]
    const at::Tensor k = k_all.narrow(1, sinks, n).repeat_interleave(h / kv, 0);                            // [H, n, d]
    const at::Tensor v = in.step->values.to(at::kDouble).narrow(1, sinks, n).repeat_interleave(h / kv, 0);  // [H, n, d]
    const at::Tensor alignment = at::matmul(unit(k), unit(anchor).unsqueeze(-1)).squeeze(-1).clamp(-1.0, 1.0);
    const at::Tensor logits = o_.tau * alignment;
    const at::Tensor w = (logits - std::get<0>(logits.max(-1, /*keepdim=*/true))).exp();  // [H, n]
    const at::Tensor weighted = v * (w + o_.epsilon).unsqueeze(-1);
    const at::Tensor capacity = at::eye(d, v.options()) + at::matmul(weighted.transpose(1, 2), v);  // [H, d, d]
    const at::Tensor solved = at::linalg_solve(capacity, v.transpose(1, 2));                        // A⁻¹ vᵢ
    const at::Tensor scores = aggregate_heads(w * (v.transpose(1, 2) * solved).sum(1), kv, in.agg);
    return protect_ends(at::cat({at::zeros({kv, sinks}, scores.options()), scores}, 1), sinks, 0);
  }

 private:
  CapOptions o_;
};

}  // namespace

void register_cap() {
  register_method("cap",
                  "capacity each value adds for the expected queries, w * v^T A^-1 v (CAPKV, arXiv:2604.25975; "
                  "tau=5,future=512,sinks=4,epsilon=1e-6)",
                  [](const PressParams& p) {
                    p.check_known_keys({"tau", "future", "sinks", "epsilon", "agg", "heads"});
                    const SpecValues v = p.typed();
                    CapOptions o;
                    o.tau = v.get_nonnegative("tau", 5.0);
                    o.epsilon = v.get_nonnegative("epsilon", 1e-6);
                    o.future = v.get_int("future", 512);
                    KVC_CHECK(o.future >= 1, "--press {}: future must be >= 1, got {}", p.name, o.future);
                    o.sinks = v.get_count("sinks", 4);
                    PressConfig c;
                    c.scorer = std::make_shared<CapScorer>(o);
                    return c;
                  });
}

}  // namespace kvc
