#include "kernels/matvec.h"

#include <ATen/Parallel.h>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
// Four rows at a time share each load of x; two accumulators per row hide the FMA latency.
KVC_AVX2 void matvec_rows(const float* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
  const int64_t n16 = n / 16 * 16;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const float* w0 = w + r * n;
    const float* w1 = w0 + n;
    const float* w2 = w1 + n;
    const float* w3 = w2 + n;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t j = 0; j < n16; j += 16) {
      const __m256 x0 = _mm256_loadu_ps(x + j), x1 = _mm256_loadu_ps(x + j + 8);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + j), x0, a0);
      b0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + j + 8), x1, b0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + j), x0, a1);
      b1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + j + 8), x1, b1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + j), x0, a2);
      b2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + j + 8), x1, b2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + j), x0, a3);
      b3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + j + 8), x1, b3);
    }
    float s0 = simd::horizontal_sum(_mm256_add_ps(a0, b0)), s1 = simd::horizontal_sum(_mm256_add_ps(a1, b1));
    float s2 = simd::horizontal_sum(_mm256_add_ps(a2, b2)), s3 = simd::horizontal_sum(_mm256_add_ps(a3, b3));
    for (int64_t j = n16; j < n; ++j) {
      s0 += w0[j] * x[j];
      s1 += w1[j] * x[j];
      s2 += w2[j] * x[j];
      s3 += w3[j] * x[j];
    }
    y[r] = s0;
    y[r + 1] = s1;
    y[r + 2] = s2;
    y[r + 3] = s3;
  }
  for (; r < r1; ++r) {
    const float* wr = w + r * n;
    __m256 a = _mm256_setzero_ps();
    for (int64_t j = 0; j < n16; j += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j), _mm256_loadu_ps(x + j), a);
    float s = simd::horizontal_sum(a);
    for (int64_t j = n16; j < n; ++j) s += wr[j] * x[j];
    y[r] = s;
  }
}
#endif

}  // namespace

at::Tensor fast_matvec(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias) {
#if defined(__x86_64__)
  if (!cpu_has_avx2_fma() || !weight.device().is_cpu() || weight.scalar_type() != at::kFloat || weight.dim() != 2 ||
      !weight.is_contiguous() || x.scalar_type() != at::kFloat || x.dim() != 1 || x.size(0) != weight.size(1)) {
    return {};
  }
  const int64_t rows = weight.size(0), cols = weight.size(1);
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({rows}, x.options());
  const float* w = weight.data_ptr<float>();
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Split only when each thread streams at least ~256 KB: small models stay single-threaded.
  const int64_t grain = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, cols));
  at::parallel_for(0, rows, grain, [&](int64_t r0, int64_t r1) { matvec_rows(w, xp, yp, r0, r1, cols); });
  if (bias.defined()) y.add_(bias);
  return y;
#else
  return {};
#endif
}

}  // namespace kvc
