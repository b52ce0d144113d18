// The block kernels' other form, for comparison (kvc-bench --block-kernels): the weights dequantized in
// registers, value = scale * code + bias for each run of 16 codes widened to fp32, and multiplied with
// the fp32 activations by FMA. No activation rounding, more instructions per weight.
#include "kernels/block_dot.h"

#if defined(__x86_64__)
#include "kernels/block_codes_avx512.h"

namespace kvc {
namespace {

using namespace block_avx512;

// 16 unsigned codes (bytes) as floats.
KVC_AVX512_VNNI inline __m512 widen(__m128i codes) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(codes)); }

// acc += (scale * codes + bias) . x over 32 values.
KVC_AVX512_VNNI inline __m512 run32(__m256i codes, float scale, float bias, const float* x, __m512 acc) {
  const __m512 s = _mm512_set1_ps(scale), b = _mm512_set1_ps(bias);
  acc = _mm512_fmadd_ps(_mm512_fmadd_ps(widen(_mm256_castsi256_si128(codes)), s, b), _mm512_loadu_ps(x), acc);
  return _mm512_fmadd_ps(_mm512_fmadd_ps(widen(_mm256_extracti128_si256(codes, 1)), s, b), _mm512_loadu_ps(x + 16),
                         acc);
}

template <class F>
KVC_AVX512_VNNI float dot_q32(const uint8_t* row, int64_t blocks, const float* x) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    const float d = half_at(b);
    acc = run32(F::codes(b), d, F::kMin ? half_at(b + 2) : -static_cast<float>(F::kOffset) * d, x + 32 * i, acc);
  }
  return _mm512_reduce_add_ps(acc);
}

KVC_AVX512_VNNI float dot_q8_0(const uint8_t* row, int64_t blocks, const float* x) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 34;
    const __m512 d = _mm512_set1_ps(half_at(b));
    const __m512 w0 =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2))));
    const __m512 w1 =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18))));
    const __m512 t =
        _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 32 * i + 16), _mm512_mul_ps(w0, _mm512_loadu_ps(x + 32 * i)));
    acc0 = _mm512_fmadd_ps(t, d, acc0);
    std::swap(acc0, acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}

template <bool FiveBits>
KVC_AVX512_VNNI float dot_q45_k(const uint8_t* row, int64_t blocks, const float* x) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    uint64_t scale8, min8;
    scales_and_mins(b + 4, &scale8, &min8);
    uint8_t scale[8], min[8];
    std::memcpy(scale, &scale8, 8);
    std::memcpy(min, &min8, 8);
    const float d = half_at(b), dmin = half_at(b + 2);
    uint32_t high[8] = {};
    if constexpr (FiveBits) {
      // Bit j of the 32 high-bit bytes, as a 32-bit mask per sub-block j.
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
      for (int j = 0; j < 8; ++j) high[j] = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_slli_epi16(h, 7 - j)));
    }
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + 32 * g));
      for (int s = 0; s < 2; ++s) {
        const int j = 2 * g + s;
        __m256i codes = _mm256_and_si256(s ? _mm256_srli_epi16(bytes, 4) : bytes, low4);
        if constexpr (FiveBits) codes = _mm256_mask_add_epi8(codes, high[j], codes, _mm256_set1_epi8(0x10));
        acc = run32(codes, d * scale[j], -dmin * min[j], x + 256 * i + 32 * j, acc);
      }
    }
  }
  return _mm512_reduce_add_ps(acc);
}

KVC_AVX512_VNNI float dot_q6_k(const uint8_t* row, int64_t blocks, const float* x) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 210;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      const __m256i v[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), two)),
          _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), two)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, two)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(hb, 2), two)),
      };
      for (int k = 0; k < 4; ++k) {
        const float* xs = x + 256 * i + 128 * h + 32 * k;
        const int g = 8 * h + 2 * k;
        const float s0 = d * scales[g], s1 = d * scales[g + 1];
        acc = _mm512_fmadd_ps(
            _mm512_fmadd_ps(widen(_mm256_castsi256_si128(v[k])), _mm512_set1_ps(s0), _mm512_set1_ps(-32.0f * s0)),
            _mm512_loadu_ps(xs), acc);
        acc = _mm512_fmadd_ps(
            _mm512_fmadd_ps(widen(_mm256_extracti128_si256(v[k], 1)), _mm512_set1_ps(s1), _mm512_set1_ps(-32.0f * s1)),
            _mm512_loadu_ps(xs + 16), acc);
      }
    }
  }
  return _mm512_reduce_add_ps(acc);
}

template <float (*Dot)(const uint8_t*, int64_t, const float*), int64_t BlockValues>
void rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const float* x, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) y[r] = Dot(w + r * row_bytes, cols / BlockValues, x);
}

}  // namespace

BlockRowsFloatKernel avx512_float_block_kernel(BlockType type) {
  switch (type) {
    case BlockType::Q4_0: return rows<dot_q32<Q4_0>, 32>;
    case BlockType::Q4_1: return rows<dot_q32<Q4_1>, 32>;
    case BlockType::Q5_0: return rows<dot_q32<Q5_0>, 32>;
    case BlockType::Q5_1: return rows<dot_q32<Q5_1>, 32>;
    case BlockType::Q8_0: return rows<dot_q8_0, 32>;
    case BlockType::Q4_K: return rows<dot_q45_k<false>, 256>;
    case BlockType::Q5_K: return rows<dot_q45_k<true>, 256>;
    case BlockType::Q6_K: return rows<dot_q6_k, 256>;
    default: return nullptr;
  }
}

}  // namespace kvc
#else
namespace kvc {
BlockRowsFloatKernel avx512_float_block_kernel(BlockType) { return nullptr; }
}  // namespace kvc
#endif
