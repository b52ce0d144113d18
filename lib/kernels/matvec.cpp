#include "kernels/matvec.h"

#include "kernels/cpu_features.h"
#include "kernels/half_precision.h"
#include "kernels/simd_avx2.h"
#include "runtime/balanced_parallel_for.h"
#include "runtime/gradient_recording.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
// One row at a time, four accumulators: a single sequential stream per thread, which the hardware
// prefetcher follows best (interleaving four rows to share the loads of x was slower when tried).
// Asking for the lines 2 KB ahead as well keeps more of that stream in flight than the hardware
// prefetcher does alone, across row and page ends; a decode step is bound by this stream.
KVC_AVX2 void matvec_rows(const float* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
  const int64_t n32 = n / 32 * 32, n8 = n / 8 * 8;
  for (int64_t r = r0; r < r1; ++r) {
    const float* wr = w + r * n;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t j = 0;
    for (; j < n32; j += 32) {
      _mm_prefetch(reinterpret_cast<const char*>(wr + j + 512), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(wr + j + 528), _MM_HINT_T0);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j), _mm256_loadu_ps(x + j), a0);
      a1 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j + 8), _mm256_loadu_ps(x + j + 8), a1);
      a2 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j + 16), _mm256_loadu_ps(x + j + 16), a2);
      a3 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j + 24), _mm256_loadu_ps(x + j + 24), a3);
    }
    for (; j < n8; j += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(wr + j), _mm256_loadu_ps(x + j), a0);
    float s = simd::horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; j < n; ++j) s += wr[j] * x[j];
    y[r] = s;
  }
}
#endif

}  // namespace

void fp32_matvec_rows(const float* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return matvec_rows(w, x, y, r0, r1, n);
#endif
  for (int64_t r = r0; r < r1; ++r) {
    float s = 0.0f;
    for (int64_t j = 0; j < n; ++j) s += w[r * n + j] * x[j];
    y[r] = s;
  }
}

namespace {

#if defined(__x86_64__)
bool fast_path_applies(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias) {
  return cpu_has_avx2_fma() && weight.device().is_cpu() &&
         (weight.scalar_type() == at::kFloat || is_half_type(weight.scalar_type())) && weight.dim() == 2 &&
         weight.is_contiguous() && x.scalar_type() == at::kFloat && x.size(-1) == weight.size(1) &&
         !records_gradient({weight, x, bias});
}

// Y [B, rows] = X [B, cols] W^T, each input's rows by the single-vector kernel, chunk by chunk.
at::Tensor matvec_inputs(const at::Tensor& weight, const at::Tensor& x2, const at::Tensor& bias,
                         const std::function<void()>& alongside) {
  const int64_t rows = weight.size(0), cols = weight.size(1), inputs = x2.size(0);
  const at::Tensor xc = x2.contiguous();
  at::Tensor y = at::empty({inputs, rows}, x2.options());
  const float* xp = xc.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  // Split only when each thread streams at least ~256 KB: small models stay single-threaded. Chunks of
  // ~128 KB bound the wait at the end of a product to about one chunk's stream (and stay in cache while
  // every input is multiplied with them). The split does not depend on the number of inputs, so one
  // input's product runs exactly as fast_matvec's.
  const int64_t row_bytes = std::max<int64_t>(1, cols * weight.element_size());
  const int64_t min_rows_per_thread = std::max<int64_t>(16, (int64_t{1} << 18) / row_bytes);
  const int64_t chunk = rows < 2 * min_rows_per_thread ? rows : (int64_t{1} << 17) / row_bytes;
  const bool half = is_half_type(weight.scalar_type());
  const at::ScalarType type = weight.scalar_type();
  const void* w = weight.data_ptr();
  balanced_parallel_for(
      rows, chunk,
      [&](int64_t r0, int64_t r1) {
        for (int64_t b = 0; b < inputs; ++b) {
          const float* xb = xp + b * cols;
          float* yb = yp + b * rows;
          if (half) {
            half_matvec_rows(type, w, xb, yb, r0, r1, cols);
          } else {
            matvec_rows(static_cast<const float*>(w), xb, yb, r0, r1, cols);
          }
        }
      },
      alongside);
  if (bias.defined()) y.add_(bias);
  return y;
}
#endif

}  // namespace

at::Tensor fast_matvec(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias,
                       const std::function<void()>& alongside) {
#if defined(__x86_64__)
  if (x.dim() != 1 || !fast_path_applies(weight, x, bias)) return {};
  return matvec_inputs(weight, x.unsqueeze(0), bias, alongside)[0];
#else
  return {};
#endif
}

at::Tensor fast_matvec_each(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias,
                            const std::function<void()>& alongside) {
#if defined(__x86_64__)
  if (x.dim() != 2 || !fast_path_applies(weight, x, bias)) return {};
  return matvec_inputs(weight, x, bias, alongside);
#else
  return {};
#endif
}

}  // namespace kvc
