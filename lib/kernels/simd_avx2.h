#pragma once
// Small AVX2/FMA building blocks shared by the CPU kernels. Every function carries the target
// attribute so that callers compiled for plain x86-64 can still include this header; only call
// them after cpu_has_avx2_fma().
#if defined(__x86_64__)
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

// F16C (half-precision conversion) came with the first AVX CPUs: every AVX2 CPU has it, and
// cpu_has_avx2_fma() checks it too.
#define KVC_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace kvc::simd {

KVC_AVX2 inline float horizontal_sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

KVC_AVX2 inline float horizontal_max(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Lane i of the result = horizontal sum of a[i]: eight dot products finished at once.
KVC_AVX2 inline __m256 transpose_sum8(const __m256 a[8]) {
  const __m256 t0 = _mm256_hadd_ps(a[0], a[1]), t1 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 t2 = _mm256_hadd_ps(a[4], a[5]), t3 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// exp(x) to ~2 ulp (Cephes polynomial after range reduction by ln 2); exp(-inf) = 0.
KVC_AVX2 inline __m256 exp(__m256 x) {
  x = _mm256_min_ps(x, _mm256_set1_ps(88.3762626647949f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-88.3762626647949f));
  __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_add_ps(_mm256_fmadd_ps(y, _mm256_mul_ps(x, x), x), _mm256_set1_ps(1.0f));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// Largest of row[0, n) (-inf when n = 0).
KVC_AVX2 inline float max_of(const float* row, int64_t n) {
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t s = 0;
  for (; s + 8 <= n; s += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + s));
  float max = horizontal_max(m);
  for (; s < n; ++s) max = std::max(max, row[s]);
  return max;
}

// row[0, n) <- exp(row - max) in place (exp(-inf) = 0 exactly); returns the sum of the results.
KVC_AVX2 inline float exp_shifted(float* row, int64_t n, float max) {
  const __m256 max_v = _mm256_set1_ps(max);
  __m256 sum_v = _mm256_setzero_ps();
  int64_t s = 0;
  for (; s + 8 <= n; s += 8) {
    const __m256 e = exp(_mm256_sub_ps(_mm256_loadu_ps(row + s), max_v));
    _mm256_storeu_ps(row + s, e);
    sum_v = _mm256_add_ps(sum_v, e);
  }
  float sum = horizontal_sum(sum_v);
  for (; s < n; ++s) {
    row[s] = std::exp(row[s] - max);
    sum += row[s];
  }
  return sum;
}

// Eight 16-bit weights widened to fp32 (exact for both formats): bf16 is the top half of an fp32.
KVC_AVX2 inline __m256 load_bf16x8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

KVC_AVX2 inline __m256 load_f16x8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Rows of fp32, bf16 or f16 values read eight at a time as fp32: the kernels that stream a cache or
// a weight matrix are written once over these.
struct Fp32Rows {
  using Element = float;
  KVC_AVX2 static __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
};
struct Bf16Rows {
  using Element = uint16_t;
  KVC_AVX2 static __m256 load8(const uint16_t* p) { return load_bf16x8(p); }
};
struct F16Rows {
  using Element = uint16_t;
  KVC_AVX2 static __m256 load8(const uint16_t* p) { return load_f16x8(p); }
};

}  // namespace kvc::simd
#endif
