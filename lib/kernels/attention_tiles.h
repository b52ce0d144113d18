#pragma once
// Register-tiled AVX2/FMA micro-kernels for prefill attention: up to 6 query rows at a time, 12
// accumulators in registers, each loaded operand reused across the tile. They replace BLAS calls
// whose shapes (inner size 64 for Q K^T, 64 output columns for P V) ran well below the GEMM peak and
// re-packed the same keys for every query block. Only call after cpu_has_avx2_fma().
#if defined(__x86_64__)
#include <cstdint>

#include "kernels/simd_avx2.h"

namespace kvc::tiles {

constexpr int kMaxRows = 6;
constexpr int kPanel = 16;  // keys per packed panel

// Keys [S, d] (row stride `row_stride`) -> panels of 16 keys, panel-major, each stored as d rows of 16
// floats (key i of the panel at lane i), zero past S. `packed` holds ceil(S / 16) * 16 * d floats.
KVC_AVX2 inline void pack_key_panels(const float* keys, int64_t row_stride, int64_t S, int64_t d, float* packed) {
  for (int64_t p0 = 0; p0 < S; p0 += kPanel) {
    float* panel = packed + p0 * d;
    const int64_t n = S - p0 < kPanel ? S - p0 : kPanel;
    for (int64_t c = 0; c < d; ++c) {
      for (int64_t i = 0; i < n; ++i) panel[c * kPanel + i] = keys[(p0 + i) * row_stride + c];
      for (int64_t i = n; i < kPanel; ++i) panel[c * kPanel + i] = 0.0f;
    }
  }
}

// scores[r, 0..16) = scale * q_r . (the panel's 16 keys), for R query rows q_r = q + r * q_stride.
template <int R>
KVC_AVX2 void score_tile(const float* q, int64_t q_stride, const float* panel, int64_t d, float scale, float* scores,
                         int64_t score_stride) {
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();  // q_r . k over c = 0 .. d-1
  for (int64_t c = 0; c < d; ++c) {
    const __m256 k0 = _mm256_loadu_ps(panel + c * kPanel), k1 = _mm256_loadu_ps(panel + c * kPanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(q + r * q_stride + c);
      acc[r][0] = _mm256_fmadd_ps(a, k0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(a, k1, acc[r][1]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm256_storeu_ps(scores + r * score_stride, _mm256_mul_ps(acc[r][0], s));
    _mm256_storeu_ps(scores + r * score_stride + 8, _mm256_mul_ps(acc[r][1], s));
  }
}

// out[r, 0..8W) += sum over s in [0, S) of p[r, s] * v[s, 0..8W), for R rows (W = 1 or 2 vectors).
template <int R, int W>
KVC_AVX2 void value_tile(const float* p, int64_t p_stride, const float* v, int64_t v_stride, int64_t S, float* out,
                         int64_t out_stride) {
  __m256 acc[R][W];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) acc[r][w] = _mm256_loadu_ps(out + r * out_stride + 8 * w);
  for (int64_t s = 0; s < S; ++s) {
    __m256 b[W];
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) b[w] = _mm256_loadu_ps(v + s * v_stride + 8 * w);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 a = _mm256_broadcast_ss(p + r * p_stride + s);
#pragma GCC unroll 8
      for (int w = 0; w < W; ++w) acc[r][w] = _mm256_fmadd_ps(a, b[w], acc[r][w]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int w = 0; w < W; ++w) _mm256_storeu_ps(out + r * out_stride + 8 * w, acc[r][w]);
}

}  // namespace kvc::tiles
#endif
