#include "kernels/gated_activation.h"

#include <cmath>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"
#include "runtime/gradient_recording.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
// silu(g) = g / (1 + e^-g).
KVC_AVX2 inline __m256 silu8(__m256 g) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(g, _mm256_add_ps(one, simd::exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

// gelu_tanh(g) = g / 2 (1 + tanh(y)), y = sqrt(2 / pi) (g + 0.044715 g^3), taken as g / (1 + e^-2y) (the
// same value: 1 + tanh(y) = 2 / (1 + e^-2y)) so that the far negative tail does not cancel.
KVC_AVX2 inline __m256 gelu_tanh8(__m256 g) {
  const __m256 g3 = _mm256_mul_ps(_mm256_mul_ps(g, g), g);
  const __m256 y =
      _mm256_mul_ps(_mm256_set1_ps(0.7978845608028654f), _mm256_fmadd_ps(_mm256_set1_ps(0.044715f), g3, g));
  const __m256 e = simd::exp(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_add_ps(y, y)));
  return _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

float silu1(float g) { return g / (1.0f + std::exp(-g)); }
float gelu_tanh1(float g) { return g / (1.0f + std::exp(-2.0f * 0.7978845608028654f * (g + 0.044715f * g * g * g))); }

template <bool Gelu>
KVC_AVX2 void gate_rows(const float* in, int64_t T, int64_t inter, float* out) {
  for (int64_t t = 0; t < T; ++t) {
    const float* gate = in + t * 2 * inter;
    const float* up = gate + inter;
    float* o = out + t * inter;
    int64_t i = 0;
    for (; i + 8 <= inter; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 a = Gelu ? gelu_tanh8(g) : silu8(g);
      _mm256_storeu_ps(o + i, _mm256_mul_ps(a, _mm256_loadu_ps(up + i)));
    }
    for (; i < inter; ++i) o[i] = (Gelu ? gelu_tanh1(gate[i]) : silu1(gate[i])) * up[i];
  }
}
#endif

}  // namespace

at::Tensor fast_gated_activation(const at::Tensor& gate_up, int64_t inter, bool gelu_tanh) {
#if defined(__x86_64__)
  if (!cpu_has_avx2_fma() || !gate_up.device().is_cpu() || gate_up.scalar_type() != at::kFloat || gate_up.dim() != 2 ||
      gate_up.size(1) != 2 * inter || !gate_up.is_contiguous() || records_gradient({gate_up})) {
    return {};
  }
  const int64_t T = gate_up.size(0);
  at::Tensor out = at::empty({T, inter}, gate_up.options());
  gelu_tanh ? gate_rows<true>(gate_up.data_ptr<float>(), T, inter, out.data_ptr<float>())
            : gate_rows<false>(gate_up.data_ptr<float>(), T, inter, out.data_ptr<float>());
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
