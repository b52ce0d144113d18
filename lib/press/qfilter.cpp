// Q-Filters (Godey et al. 2025, arXiv:2503.02812): queries and keys of a head share one dominant direction,
// so a key's projection on it estimates the attention it will get, with no attention computed. The paper
// calibrates one filter per layer × KV head offline (the first right singular vector of many queries) and
// kvpress loads those from the Hugging Face hub, where kvc cannot reach. kvc computes the filter from the
// prompt's own queries: the first right singular vector u of the KV head's query heads' rotated queries
// stacked (the top eigenvector of QᵀQ), oriented so that the queries project positively on it. A key's score
// is its projection k·u (keys as the cache holds them): the mean query q̄ ≈ (q̄·u) u gives q̄·k ≈ (q̄·u)(k·u).
#include "press/press.h"

namespace kvc {
namespace {

class QFilterScorer : public Scorer {
 public:
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor k = rotated_keys(in, "qfilter").to(at::kDouble);  // [n_kv, S, d]
    const int64_t kv = k.size(0), d = k.size(2);
    const at::Tensor q = in.step->queries.to(at::kDouble);  // [H, S, d], rotated
    const at::Tensor grouped = q.reshape({kv, -1, d});      // each KV head's query heads, stacked
    const at::Tensor u = filters(grouped);                  // [n_kv, d]
    return at::matmul(k, u.unsqueeze(-1)).squeeze(-1);
  }

  // The first right singular vector of each x [n_kv, m, d], oriented so that x's rows project positively.
  static at::Tensor filters(const at::Tensor& x) {
    const at::Tensor gram = at::matmul(x.transpose(1, 2), x);  // [n_kv, d, d]
    const at::Tensor vectors = std::get<1>(at::linalg_eigh(gram));
    const at::Tensor u = vectors.select(2, vectors.size(2) - 1);  // eigenvalues ascend: the last is the largest
    const at::Tensor negative = (at::matmul(x, u.unsqueeze(-1)).sum({1, 2}) < 0).to(at::kDouble);
    return u * (1.0 - 2.0 * negative).unsqueeze(-1);
  }
};

}  // namespace

void register_qfilter() {
  register_method("qfilter",
                  "keys' projection on the dominant direction of the prompt's queries (Q-Filters, arXiv:2503.02812, "
                  "filters computed from the prompt)",
                  [](const PressParams& p) {
                    p.check_known_keys({"agg", "heads"});
                    PressConfig c;
                    c.scorer = std::make_shared<QFilterScorer>();
                    return c;
                  });
}

}  // namespace kvc
