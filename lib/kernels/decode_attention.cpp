#include "kernels/decode_attention.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_features.h"
#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
struct HeadView {
  const float* queries;  // [G, d]
  const float* keys;     // [S, d]
  const float* values;   // [S, d]
  const int64_t* positions;
  float* out;    // [G, d]
  float* probs;  // [G, S] or null
};

// scores[g, s] = scale * q_g . k_s, eight keys at a time (one transpose-sum per eight dot products).
// D8 = head_dim / 8 when known at compile time (the loops then unroll into registers), else 0.
template <int D8>
KVC_AVX2 void score_keys(const HeadView& h, int64_t G, int64_t S, int64_t d_runtime, float scale, float* scores) {
  const int64_t d = D8 > 0 ? D8 * 8 : d_runtime;
  const __m256 scale_v = _mm256_set1_ps(scale);
  int64_t s = 0;
  for (; s + 8 <= S; s += 8) {
    const float* k = h.keys + s * d;
    for (int64_t g = 0; g < G; ++g) {
      const float* q = h.queries + g * d;
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(_mm256_loadu_ps(k + i * d + c), qv, acc[i]);
      }
      _mm256_storeu_ps(scores + g * S + s, _mm256_mul_ps(simd::transpose_sum8(acc), scale_v));
    }
  }
  for (; s < S; ++s) {
    for (int64_t g = 0; g < G; ++g) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) {
        acc = _mm256_fmadd_ps(_mm256_loadu_ps(h.keys + s * d + c), _mm256_loadu_ps(h.queries + g * d + c), acc);
      }
      scores[g * S + s] = scale * simd::horizontal_sum(acc);
    }
  }
}

// Turns one row of scores into unnormalised probabilities exp(x - max) in place; returns their sum
// (0 when no entry is visible).
KVC_AVX2 float exponentiate(float* row, int64_t S) {
  const float max = simd::max_of(row, S);
  if (max == -std::numeric_limits<float>::infinity()) {
    std::fill(row, row + S, 0.0f);
    return 0.0f;
  }
  return simd::exp_shifted(row, S, max);
}

// out[g] = sum_s p[g, s] v_s. With the head size known, each value row is read once into D8
// independent accumulators; otherwise in blocks that stay in L1 across the group.
template <int D8>
KVC_AVX2 void weigh_values(const HeadView& h, int64_t G, int64_t S, int64_t d_runtime, const float* probs) {
  if constexpr (D8 > 0) {
    constexpr int64_t d = D8 * 8;
    for (int64_t g = 0; g < G; ++g) {
      const float* p = probs + g * S;
      __m256 acc[D8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t s = 0; s < S; ++s) {
        const __m256 weight = _mm256_set1_ps(p[s]);
        const float* v = h.values + s * d;
        for (int c = 0; c < D8; ++c) acc[c] = _mm256_fmadd_ps(weight, _mm256_loadu_ps(v + 8 * c), acc[c]);
      }
      for (int c = 0; c < D8; ++c) _mm256_storeu_ps(h.out + g * d + 8 * c, acc[c]);
    }
    return;
  }
  const int64_t d = d_runtime;
  constexpr int64_t kBlock = 64;
  for (int64_t b0 = 0; b0 < S; b0 += kBlock) {
    const int64_t b1 = std::min(S, b0 + kBlock);
    for (int64_t g = 0; g < G; ++g) {
      const float* p = probs + g * S;
      float* out = h.out + g * d;
      for (int64_t c = 0; c < d; c += 8) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0;
        int64_t s = b0;
        for (; s + 2 <= b1; s += 2) {
          a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[s]), _mm256_loadu_ps(h.values + s * d + c), a0);
          a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[s + 1]), _mm256_loadu_ps(h.values + (s + 1) * d + c), a1);
        }
        if (s < b1) a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[s]), _mm256_loadu_ps(h.values + s * d + c), a0);
        _mm256_storeu_ps(out + c, _mm256_add_ps(_mm256_loadu_ps(out + c), _mm256_add_ps(a0, a1)));
      }
    }
  }
}

template <int D8>
KVC_AVX2 void attend_head(const HeadView& h, int64_t G, int64_t S, int64_t d, int64_t q_position, int64_t window) {
  // Per-thread scratch that only grows: no allocation (and no zero fill) per head per step.
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(G * S + G)) scratch.resize(static_cast<size_t>(G * S + G));
  float* scores = scratch.data();
  float* inverse_sums = scores + G * S;
  score_keys<D8>(h, G, S, d, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))), scores);
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t s = 0; s < S; ++s) {
    const int64_t p = h.positions[s];
    if (p > q_position || (window > 0 && p <= q_position - window)) {
      for (int64_t g = 0; g < G; ++g) scores[g * S + s] = neg_inf;
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    const float sum = exponentiate(scores + g * S, S);
    inverse_sums[g] = sum > 0 ? 1.0f / sum : 0.0f;
  }
  for (int64_t i = 0; i < G * d; ++i) h.out[i] = 0.0f;
  weigh_values<D8>(h, G, S, d, scores);
  for (int64_t g = 0; g < G; ++g) {
    const float inv = inverse_sums[g];
    for (int64_t c = 0; c < d; ++c) h.out[g * d + c] *= inv;
    if (h.probs != nullptr) {
      for (int64_t s = 0; s < S; ++s) h.probs[g * S + s] = scores[g * S + s] * inv;
    }
  }
}

KVC_AVX2 void attend_head_any(const HeadView& h, int64_t G, int64_t S, int64_t d, int64_t q_position, int64_t window) {
  switch (d) {
    case 32: return attend_head<4>(h, G, S, d, q_position, window);
    case 64: return attend_head<8>(h, G, S, d, q_position, window);
    case 128: return attend_head<16>(h, G, S, d, q_position, window);
    default: return attend_head<0>(h, G, S, d, q_position, window);
  }
}
#endif

}  // namespace

at::Tensor fast_decode_attention(const at::Tensor& queries, int64_t q_position, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                 at::Tensor* probabilities) {
#if defined(__x86_64__)
  const auto is_cpu_float = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  if (!cpu_has_avx2_fma() || !is_cpu_float(queries) || !is_cpu_float(keys) || !is_cpu_float(values) ||
      queries.dim() != 3 || queries.size(1) != 1 || keys.dim() != 3 || values.sizes() != keys.sizes() ||
      key_positions.scalar_type() != at::kLong || !key_positions.device().is_cpu() ||
      records_gradient({queries, keys, values})) {
    return {};
  }
  const int64_t H = queries.size(0), KV = keys.size(0), S = keys.size(1), d = keys.size(2);
  if (KV == 0 || H % KV != 0 || d % 8 != 0 || queries.size(2) != d || S == 0) return {};
  const bool rows_contiguous = keys.stride(2) == 1 && keys.stride(1) == d && values.stride(2) == 1 &&
                               values.stride(1) == d && key_positions.stride(1) == 1;
  if (!rows_contiguous) return {};
  const int64_t G = H / KV;
  const at::Tensor q = queries.contiguous();
  at::Tensor out = at::empty({H, 1, d}, queries.options());
  const float* qp = q.data_ptr<float>();
  const float* kp = keys.data_ptr<float>();
  const float* vp = values.data_ptr<float>();
  const int64_t* pp = key_positions.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  float* pp_out = nullptr;
  if (probabilities != nullptr) {
    *probabilities = at::empty({H, S}, queries.options());
    pp_out = probabilities->data_ptr<float>();
  }
  at::parallel_for(0, KV, parallel_grain(2 * G * S * d), [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const HeadView view{qp + h * G * d, kp + h * keys.stride(0), vp + h * values.stride(0),
                          pp + h * key_positions.stride(0), op + h * G * d,
                          pp_out == nullptr ? nullptr : pp_out + h * G * S};
      attend_head_any(view, G, S, d, q_position, sliding_window);
    }
  });
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
