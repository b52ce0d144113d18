#include "kernels/decode_attention.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/half_precision.h"
#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"
#include "kernels/cache_rows_avx2.h"
#include "kernels/row_formats.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
struct HeadView {
  const float* queries;  // [G, d]
  const void* keys;      // S rows of d values in the keys' stored format
  const void* values;    // S rows of d values in the values' stored format
  const int64_t* positions;
  float* out;    // [G, d]
  float* probs;  // [G, S] or null
};

// scores[g, s] = scale * q_g . k_s, eight keys at a time (one transpose-sum per eight dot products).
// D8 = head_dim / 8 when known at compile time (the loops then unroll into registers), else 0.
template <int D8, typename Keys>
KVC_AVX2 void score_keys(const HeadView& h, int64_t G, int64_t S, int64_t d_runtime, float scale, float* scores) {
  const int64_t d = D8 > 0 ? D8 * 8 : d_runtime;
  using Element = typename Keys::Element;
  const __m256 scale_v = _mm256_set1_ps(scale);
  int64_t s = 0;
  for (; s + 8 <= S; s += 8) {
    const Element* k[8];
    for (int i = 0; i < 8; ++i) k[i] = Keys::row(h.keys, s + i, d);
    for (int64_t g = 0; g < G; ++g) {
      const float* q = h.queries + g * d;
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + c);
        for (int i = 0; i < 8; ++i) acc[i] = _mm256_fmadd_ps(Keys::load8(k[i], c), qv, acc[i]);
      }
      _mm256_storeu_ps(scores + g * S + s, _mm256_mul_ps(simd::transpose_sum8(acc), scale_v));
    }
  }
  for (; s < S; ++s) {
    const Element* k = Keys::row(h.keys, s, d);
    for (int64_t g = 0; g < G; ++g) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) {
        acc = _mm256_fmadd_ps(Keys::load8(k, c), _mm256_loadu_ps(h.queries + g * d + c), acc);
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
template <int D8, typename Values>
KVC_AVX2 void weigh_values(const HeadView& h, int64_t G, int64_t S, int64_t d_runtime, const float* probs) {
  if constexpr (D8 > 0) {
    constexpr int64_t d = D8 * 8;
    for (int64_t g = 0; g < G; ++g) {
      const float* p = probs + g * S;
      __m256 acc[D8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t s = 0; s < S; ++s) {
        const __m256 weight = _mm256_set1_ps(p[s]);
        const auto* v = Values::row(h.values, s, d);
        for (int c = 0; c < D8; ++c) acc[c] = _mm256_fmadd_ps(weight, Values::load8(v, 8 * c), acc[c]);
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
          a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[s]), Values::load8(Values::row(h.values, s, d), c), a0);
          a1 = _mm256_fmadd_ps(_mm256_set1_ps(p[s + 1]), Values::load8(Values::row(h.values, s + 1, d), c), a1);
        }
        if (s < b1) a0 = _mm256_fmadd_ps(_mm256_set1_ps(p[s]), Values::load8(Values::row(h.values, s, d), c), a0);
        _mm256_storeu_ps(out + c, _mm256_add_ps(_mm256_loadu_ps(out + c), _mm256_add_ps(a0, a1)));
      }
    }
  }
}

template <int D8, typename Keys, typename Values>
KVC_AVX2 void attend_head(const HeadView& h, int64_t G, int64_t S, int64_t d, int64_t q_position, int64_t window) {
  // Per-thread scratch that only grows: no allocation (and no zero fill) per head per step.
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(G * S + G)) scratch.resize(static_cast<size_t>(G * S + G));
  float* scores = scratch.data();
  float* inverse_sums = scores + G * S;
  score_keys<D8, Keys>(h, G, S, d, static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))), scores);
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
  weigh_values<D8, Values>(h, G, S, d, scores);
  for (int64_t g = 0; g < G; ++g) {
    const float inv = inverse_sums[g];
    for (int64_t c = 0; c < d; ++c) h.out[g * d + c] *= inv;
    if (h.probs != nullptr) {
      for (int64_t s = 0; s < S; ++s) h.probs[g * S + s] = scores[g * S + s] * inv;
    }
  }
}

template <typename Keys, typename Values>
KVC_AVX2 void attend_head_sized(const HeadView& h, int64_t G, int64_t S, int64_t d, int64_t q_position,
                                int64_t window) {
  switch (d) {
    case 32: return attend_head<4, Keys, Values>(h, G, S, d, q_position, window);
    case 64: return attend_head<8, Keys, Values>(h, G, S, d, q_position, window);
    case 128: return attend_head<16, Keys, Values>(h, G, S, d, q_position, window);
    default: return attend_head<0, Keys, Values>(h, G, S, d, q_position, window);
  }
}

template <typename Keys>
KVC_AVX2 void attend_head_values(at::ScalarType values, const HeadView& h, int64_t G, int64_t S, int64_t d,
                                 int64_t q_position, int64_t window) {
  switch (values) {
    case at::kBFloat16: return attend_head_sized<Keys, simd::PlainCacheRows<simd::Bf16Rows>>(h, G, S, d, q_position, window);
    case at::kHalf: return attend_head_sized<Keys, simd::PlainCacheRows<simd::F16Rows>>(h, G, S, d, q_position, window);
    case kCacheQ8_0: return attend_head_sized<Keys, simd::Q8_0CacheRows>(h, G, S, d, q_position, window);
    case kCacheQ4_0: return attend_head_sized<Keys, simd::Q4_0CacheRows>(h, G, S, d, q_position, window);
    default: return attend_head_sized<Keys, simd::PlainCacheRows<simd::Fp32Rows>>(h, G, S, d, q_position, window);
  }
}

KVC_AVX2 void attend_head_any(at::ScalarType keys, at::ScalarType values, const HeadView& h, int64_t G, int64_t S,
                              int64_t d, int64_t q_position, int64_t window) {
  switch (keys) {
    case at::kBFloat16: return attend_head_values<simd::PlainCacheRows<simd::Bf16Rows>>(values, h, G, S, d, q_position, window);
    case at::kHalf: return attend_head_values<simd::PlainCacheRows<simd::F16Rows>>(values, h, G, S, d, q_position, window);
    case kCacheQ8_0: return attend_head_values<simd::Q8_0CacheRows>(values, h, G, S, d, q_position, window);
    case kCacheQ4_0: return attend_head_values<simd::Q4_0CacheRows>(values, h, G, S, d, q_position, window);
    default: return attend_head_values<simd::PlainCacheRows<simd::Fp32Rows>>(values, h, G, S, d, q_position, window);
  }
}
#endif

}  // namespace

at::Tensor fast_decode_attention(const at::Tensor& queries, int64_t q_position, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                 at::Tensor* probabilities, at::ScalarType key_type, at::ScalarType value_type) {
#if defined(__x86_64__)
  if (key_type == at::ScalarType::Undefined) key_type = keys.scalar_type();
  if (value_type == at::ScalarType::Undefined) value_type = values.scalar_type();
  // Keys and values may be stored in 16 bits or in blocks (a typed cache): they are widened in registers.
  const auto is_cpu_rows = [](const at::Tensor& t, at::ScalarType type) {
    const bool readable = type == at::kFloat || is_half_type(type) || is_block_format(type);
    return readable && t.device().is_cpu() && t.scalar_type() == storage_dtype(type) && t.dim() == 3;
  };
  if (!cpu_has_avx2_fma() || !queries.device().is_cpu() || queries.scalar_type() != at::kFloat ||
      !is_cpu_rows(keys, key_type) || !is_cpu_rows(values, value_type) || queries.dim() != 3 ||
      queries.size(1) != 1 || values.size(0) != keys.size(0) || values.size(1) != keys.size(1) ||
      key_positions.scalar_type() != at::kLong || !key_positions.device().is_cpu() ||
      records_gradient({queries, keys, values})) {
    return {};
  }
  const int64_t H = queries.size(0), KV = keys.size(0), S = keys.size(1), d = queries.size(2);
  if (KV == 0 || H % KV != 0 || d % 8 != 0 || S == 0) return {};
  const int64_t key_width = stored_row_width(key_type, d), value_width = stored_row_width(value_type, d);
  if ((is_block_format(key_type) || is_block_format(value_type)) && d % kRowBlockValues != 0) return {};
  const bool rows_contiguous = keys.size(2) == key_width && values.size(2) == value_width && keys.stride(2) == 1 &&
                               keys.stride(1) == key_width && values.stride(2) == 1 &&
                               values.stride(1) == value_width && key_positions.stride(1) == 1;
  if (!rows_contiguous) return {};
  const int64_t G = H / KV;
  const at::Tensor q = queries.contiguous();
  at::Tensor out = at::empty({H, 1, d}, queries.options());
  const float* qp = q.data_ptr<float>();
  const auto* kp = static_cast<const char*>(keys.data_ptr());
  const auto* vp = static_cast<const char*>(values.data_ptr());
  const int64_t key_stride = keys.stride(0) * keys.element_size(), value_stride = values.stride(0) * values.element_size();
  const int64_t* pp = key_positions.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  float* pp_out = nullptr;
  if (probabilities != nullptr) {
    *probabilities = at::empty({H, S}, queries.options());
    pp_out = probabilities->data_ptr<float>();
  }
  at::parallel_for(0, KV, parallel_grain(2 * G * S * d), [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const HeadView view{qp + h * G * d, kp + h * key_stride, vp + h * value_stride,
                          pp + h * key_positions.stride(0), op + h * G * d,
                          pp_out == nullptr ? nullptr : pp_out + h * G * S};
      attend_head_any(key_type, value_type, view, G, S, d, q_position, sliding_window);
    }
  });
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
