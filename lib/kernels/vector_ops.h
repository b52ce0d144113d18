#pragma once
// Dot products and axpy over short contiguous rows, for the kernels whose rows are too short for a
// tiled product: plain loops for any type, and AVX2 float32 versions (call those only after
// cpu_has_avx2_fma()).
#include <cstdint>

#include "kernels/simd_avx2.h"

namespace kvc {

template <typename T>
T dot_plain(const T* a, const T* b, int64_t n) {
  T s = 0;
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}

// y += a x
template <typename T>
void axpy_plain(T* y, const T* x, T a, int64_t n) {
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

#if defined(__x86_64__)
KVC_AVX2 inline float dot_avx2(const float* a, const float* b, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  float s = simd::horizontal_sum(acc);
  for (; j < n; ++j) s += a[j] * b[j];
  return s;
}

KVC_AVX2 inline void axpy_avx2(float* y, const float* x, float a, int64_t n) {
  const __m256 av = _mm256_set1_ps(a);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
  for (; j < n; ++j) y[j] += a * x[j];
}
#endif

}  // namespace kvc
