#include "kernels/best_cosine.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

// p.r and r.r over d floats.
void dot_and_norm_plain(const float* p, const float* r, int64_t d, float& dot, float& norm2) {
  dot = norm2 = 0.0f;
  for (int64_t c = 0; c < d; ++c) {
    dot += p[c] * r[c];
    norm2 += r[c] * r[c];
  }
}

#if defined(__x86_64__)
KVC_AVX2 void dot_and_norm_avx2(const float* p, const float* r, int64_t d, float& dot, float& norm2) {
  __m256 a = _mm256_setzero_ps(), b = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 8 <= d; c += 8) {
    const __m256 x = _mm256_loadu_ps(r + c);
    a = _mm256_fmadd_ps(_mm256_loadu_ps(p + c), x, a);
    b = _mm256_fmadd_ps(x, x, b);
  }
  dot = simd::horizontal_sum(a);
  norm2 = simd::horizontal_sum(b);
  for (; c < d; ++c) {
    dot += p[c] * r[c];
    norm2 += r[c] * r[c];
  }
}
#endif

}  // namespace

BestCosine best_cosine_per_head(const at::Tensor& probes, const at::Tensor& rows,
                                const std::vector<int64_t>& excluded) {
  const int64_t kv = rows.size(0), s = rows.size(1), d = rows.size(2);
  TORCH_CHECK(probes.scalar_type() == at::kFloat && rows.scalar_type() == at::kFloat && probes.device().is_cpu() &&
                  rows.device().is_cpu() && probes.stride(-1) == 1 && rows.stride(2) == 1 && probes.size(0) == kv &&
                  probes.size(1) == d && static_cast<int64_t>(excluded.size()) == kv,
              "best_cosine_per_head: float32 CPU rows with unit stride expected");
  BestCosine out{std::vector<double>(static_cast<size_t>(kv), -std::numeric_limits<double>::infinity()),
                 std::vector<int64_t>(static_cast<size_t>(kv), -1)};
  const float* p = probes.data_ptr<float>();
  const float* r = rows.data_ptr<float>();
  const int64_t p0 = probes.stride(0), r0 = rows.stride(0), r1 = rows.stride(1);
#if defined(__x86_64__)
  const auto dot_and_norm = cpu_has_avx2_fma() ? dot_and_norm_avx2 : dot_and_norm_plain;
#else
  const auto dot_and_norm = dot_and_norm_plain;
#endif
  at::parallel_for(0, kv, parallel_grain(s * d), [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      const float* probe = p + h * p0;
      double probe_norm2 = 0;
      for (int64_t c = 0; c < d; ++c) probe_norm2 += static_cast<double>(probe[c]) * probe[c];
      const double probe_norm = std::max(std::sqrt(probe_norm2), 1e-12);
      double& best = out.similarity[static_cast<size_t>(h)];
      int64_t& best_row = out.row[static_cast<size_t>(h)];
      for (int64_t j = 0; j < s; ++j) {
        if (j == excluded[static_cast<size_t>(h)]) continue;
        float dot = 0, norm2 = 0;
        dot_and_norm(probe, r + h * r0 + j * r1, d, dot, norm2);
        const double sim = dot / (probe_norm * std::max(std::sqrt(static_cast<double>(norm2)), 1e-12));
        if (sim > best) best = sim, best_row = j;
      }
    }
  });
  return out;
}

}  // namespace kvc
