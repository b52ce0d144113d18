// NonCausalAttention (Compactor's attention score, Chari & Van Durme 2025, arXiv:2507.08143): the prompt's
// chunks attend to themselves without the causal mask, so a key is scored by the queries after it and
// before it. kvpress' NonCausalAttnPress pads the last chunk to the chunk size and masks the padded keys with
// −1e-9 (not −∞), so padded entries still share the softmax and padded queries add to every key of the last
// chunk; kvc's last chunk is simply shorter. The two agree when the prompt is a multiple of the chunk.
#include "press/non_causal_attention.h"

namespace kvc {

at::Tensor non_causal_attention(const at::Tensor& queries, const at::Tensor& keys, const at::Tensor& values,
                                int64_t chunk, HeadAgg agg) {
  const int64_t h = queries.size(0), kv = keys.size(0), s = keys.size(1);
  const at::Tensor q = queries.to(at::kDouble), k = keys.to(at::kDouble).repeat_interleave(h / kv, 0);
  at::Tensor received = at::empty({h, s}, q.options());
  for (int64_t a = 0; a < s; a += chunk) {
    const int64_t n = std::min(chunk, s - a);
    const at::Tensor dots = at::matmul(q.narrow(1, a, n), k.narrow(1, a, n).transpose(1, 2));  // [H, n, n]
    received.narrow(1, a, n).copy_(at::softmax(dots, -1).sum(1));
  }
  const at::Tensor scores = aggregate_heads(received, kv, agg) * values.to(at::kDouble).norm(2, -1);
  return pool1d(scores, 3, /*zero_padding=*/true);
}

namespace {

class NonCausalAttentionScorer : public Scorer {
 public:
  explicit NonCausalAttentionScorer(int64_t chunk) : chunk_(chunk) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k = rotated_keys(in, "non_causal_attention");
    return zscore(non_causal_attention(in.step->queries, k, in.step->values, chunk_, in.agg));
  }

 private:
  int64_t chunk_;
};

}  // namespace

void register_non_causal_attention() {
  register_method("non_causal_attention",
                  "attention received within prompt chunks without the causal mask, times ||v|| "
                  "(Compactor's attention score, arXiv:2507.08143; chunk=256)",
                  [](const PressParams& p) {
                    p.check_known_keys({"chunk", "agg", "heads"});
                    const int64_t chunk = p.get_int("chunk", 256);
                    KVC_CHECK(chunk >= 1, "--press {}: chunk must be >= 1, got {}", p.name, chunk);
                    PressConfig c;
                    c.scorer = std::make_shared<NonCausalAttentionScorer>(chunk);
                    return c;
                  });
}

}  // namespace kvc
