#pragma once
// Attention written out one query at a time in float64, as the definition reads: the expectation the
// attention kernels and the shared blocked routine are tested against.
#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace kvc::test {

// queries [H, T, d], q_pos [T]; keys/values [KV, S, d], k_pos [KV, S] (query head h reads KV head
// h / (H / KV)). Entry s is visible to query t iff k_pos <= q_pos and, with window > 0,
// k_pos > q_pos - window. Returns [H, T, d] float64; `probs`, when given, receives [H, T, S].
inline at::Tensor brute_force_attention(const at::Tensor& q, const at::Tensor& q_pos, const at::Tensor& k,
                                        const at::Tensor& v, const at::Tensor& k_pos, int64_t window,
                                        at::Tensor* probs = nullptr) {
  const int64_t H = q.size(0), T = q.size(1), KV = k.size(0), S = k.size(1), d = k.size(2), G = H / KV;
  at::Tensor out = at::zeros({H, T, d}, at::kDouble);
  if (probs != nullptr) *probs = at::zeros({H, T, S}, at::kDouble);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t kv = h / G;
    for (int64_t t = 0; t < T; ++t) {
      const int64_t qp = q_pos[t].item<int64_t>();
      const at::Tensor p = k_pos[kv];
      const at::Tensor visible = (p <= qp).logical_and(window > 0 ? p > qp - window : at::ones_like(p, at::kBool));
      at::Tensor scores = at::mv(k[kv].to(at::kDouble), q[h][t].to(at::kDouble)) / std::sqrt(static_cast<double>(d));
      scores.masked_fill_(visible.logical_not(), -std::numeric_limits<double>::infinity());
      const at::Tensor weights = at::softmax(scores, 0);
      out[h][t] = at::mv(v[kv].to(at::kDouble).t(), weights);
      if (probs != nullptr) (*probs)[h][t] = weights;
    }
  }
  return out;
}

inline at::Tensor brute_force_attention(const at::Tensor& q, int64_t q_pos, const at::Tensor& k, const at::Tensor& v,
                                        const at::Tensor& k_pos, int64_t window) {
  return brute_force_attention(q, at::tensor({q_pos}, at::kLong), k, v, k_pos, window);
}

}  // namespace kvc::test
