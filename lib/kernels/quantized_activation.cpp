#include "kernels/quantized_activation.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "kernels/block_isa.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

// Both levels compute q = nearest-even(x * (127 / amax)) with the same float operations, so they give
// the same bytes.
void quantize_block_portable(const float* x, int64_t n, int8_t* q, float* d) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
  *d = amax / 127.0f;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(x[i] * inverse));
}

#if defined(__x86_64__)
KVC_AVX2 void quantize_block_avx2(const float* x, int64_t n, int8_t* q, float* d) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int64_t i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  const float amax = simd::horizontal_max(m);
  const float inverse = amax > 0.0f ? 127.0f / amax : 0.0f;
  *d = amax / 127.0f;
  const __m256 s = _mm256_set1_ps(inverse);
  for (int64_t i = 0; i < n; i += 32) {
    // Rounded to nearest even (the default rounding mode), packed 32 bits -> 16 -> 8; the packs
    // interleave 128-bit lanes, which the final permutation undoes.
    const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i), s));
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), s));
    const __m256i c = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 16), s));
    const __m256i e = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + i + 24), s));
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, e));
    const __m256i ordered = _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), ordered);
  }
}
#endif

}  // namespace

void Q8Rows::quantize(const float* x, int64_t rows, int64_t cols, int64_t block) {
  assert((block == 32 || block == 256) && cols % block == 0);
  rows_ = rows;
  cols_ = cols;
  block_ = block;
  const int64_t blocks = rows * cols / block;
  q_.resize(static_cast<size_t>(rows * cols));
  d_.resize(static_cast<size_t>(blocks));
  dsum_.resize(static_cast<size_t>(blocks));
  sum_.resize(static_cast<size_t>(blocks));
  sum16_.resize(static_cast<size_t>(rows * cols / 16));
  if (block == 256) sum32_.resize(static_cast<size_t>(rows * cols / 32));
#if defined(__x86_64__)
  const bool avx2 = block_isa() != BlockIsa::Portable;
#else
  const bool avx2 = false;
#endif
  for (int64_t b = 0; b < blocks; ++b) {
    const float* xb = x + b * block;
    int8_t* qb = q_.data() + b * block;
    float* d = d_.data() + b;
#if defined(__x86_64__)
    if (avx2) {
      quantize_block_avx2(xb, block, qb, d);
    } else {
      quantize_block_portable(xb, block, qb, d);
    }
#else
    quantize_block_portable(xb, block, qb, d);
#endif
    int32_t total = 0;
    for (int64_t g = 0; g < block; g += 16) {
      int32_t s = 0;
      for (int64_t i = g; i < g + 16; ++i) s += qb[i];
      sum16_[static_cast<size_t>((b * block + g) / 16)] = static_cast<int16_t>(s);
      total += s;
    }
    if (block == 256) {
      for (int64_t g = 0; g < block; g += 32) {
        const size_t i = static_cast<size_t>((b * block + g) / 16);
        sum32_[static_cast<size_t>((b * block + g) / 32)] = static_cast<int16_t>(sum16_[i] + sum16_[i + 1]);
      }
    }
    sum_[static_cast<size_t>(b)] = total;
    dsum_[static_cast<size_t>(b)] = *d * static_cast<float>(total);
  }
  // The pairs' lanes only feed the AVX-512 kernels: other levels skip them (a decode step quantizes its
  // input before every product).
  pairs_ = block == 32 && block_isa() == BlockIsa::Avx512Vnni;
  if (pairs_) {
    const int64_t pairs = cols / 64;  // per row
    pair_d_.resize(static_cast<size_t>(rows * pairs * 16));
    pair_negsum_.resize(pair_d_.size());
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t p = 0; p < pairs; ++p) {
        for (int64_t lane = 0; lane < 16; ++lane) {
          const size_t b = static_cast<size_t>(r * (cols / 32) + 2 * p + lane / 8);
          const size_t at = static_cast<size_t>((r * pairs + p) * 16 + lane);
          pair_d_[at] = d_[b];
          pair_negsum_[at] = lane % 8 == 0 ? -sum_[b] : 0;
        }
      }
    }
  }
}

Q8Row Q8Rows::row(int64_t r) const {
  const int64_t blocks = cols_ / block_;
  Q8Row row;
  row.q = q_.data() + r * cols_;
  row.d = d_.data() + r * blocks;
  row.sum = sum_.data() + r * blocks;
  row.dsum = dsum_.data() + r * blocks;
  row.sum16 = sum16_.data() + r * cols_ / 16;
  if (block_ == 256) row.sum32 = sum32_.data() + r * cols_ / 32;
  if (pairs_) {
    const int64_t pair_lanes = cols_ / 64 * 16;
    row.pair_d = pair_d_.data() + r * pair_lanes;
    row.pair_negsum = pair_negsum_.data() + r * pair_lanes;
  }
  return row;
}

}  // namespace kvc
