#pragma once
// A cache's rows as the decode kernel reads them: row s of a head, then eight values at column c
// widened to fp32 in registers. One type per stored format, so the kernel is written once and a
// quantized cache is read as stored, never dequantized into a copy.
#if defined(__x86_64__)
#include <cstring>

#include "kernels/row_formats.h"
#include "kernels/simd_avx2.h"

namespace kvc::simd {

// fp32, bf16 or f16 rows: `Plain` from simd_avx2.h.
template <class Plain>
struct PlainCacheRows {
  using Element = typename Plain::Element;
  static const Element* row(const void* base, int64_t s, int64_t d) {
    return static_cast<const Element*>(base) + s * d;
  }
  KVC_AVX2 static __m256 load8(const Element* row, int64_t c) { return Plain::load8(row + c); }
};

KVC_AVX2 inline __m256 block_scale(const uint8_t* block) {
  uint16_t half;
  std::memcpy(&half, block, sizeof half);
  return _mm256_set1_ps(_cvtsh_ss(half));
}

// Q8_0: value j of a block is int8 byte 2 + j times the block's half scale.
struct Q8_0CacheRows {
  using Element = uint8_t;
  static const uint8_t* row(const void* base, int64_t s, int64_t d) {
    return static_cast<const uint8_t*>(base) + s * stored_row_width(kCacheQ8_0, d);
  }
  KVC_AVX2 static __m256 load8(const uint8_t* row, int64_t c) {
    const uint8_t* block = row + (c / kRowBlockValues) * 34;
    const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + c % kRowBlockValues));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), block_scale(block));
  }
};

// Q4_0: value j < 16 is the low nibble of byte 2 + j, value j >= 16 the high nibble of byte 2 + j - 16;
// each minus 8, times the block's half scale.
struct Q4_0CacheRows {
  using Element = uint8_t;
  static const uint8_t* row(const void* base, int64_t s, int64_t d) {
    return static_cast<const uint8_t*>(base) + s * stored_row_width(kCacheQ4_0, d);
  }
  KVC_AVX2 static __m256 load8(const uint8_t* row, int64_t c) {
    const uint8_t* block = row + (c / kRowBlockValues) * 18;
    const int64_t j = c % kRowBlockValues;
    __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(block + 2 + (j & 15)));
    if (j >= 16) bytes = _mm_srli_epi16(bytes, 4);
    const __m128i nibbles = _mm_and_si128(bytes, _mm_set1_epi8(0x0F));
    const __m256i values = _mm256_sub_epi32(_mm256_cvtepu8_epi32(nibbles), _mm256_set1_epi32(8));
    return _mm256_mul_ps(_mm256_cvtepi32_ps(values), block_scale(block));
  }
};

}  // namespace kvc::simd
#endif
