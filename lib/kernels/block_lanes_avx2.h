#pragma once
// Lane helpers shared by the AVX2 and AVX-512 block kernels (block_dot_avx2.cpp, block_dot_avx512.cpp):
// AVX2 instructions only, so either file's kernels inline them.
#if defined(__x86_64__)
#include <cstdint>

#include "kernels/simd_avx2.h"

namespace kvc::block_lanes {

// The first four bytes of four consecutive blocks (`stride` bytes apart) widened as halves: lanes 2k and
// 2k + 1 are block k's halves at offset 0 and 2 (d, and m for the _1 formats).
KVC_AVX2 inline __m256 leading_halves(const uint8_t* first, int64_t stride) {
  const auto head = [&](int k) { return _mm_loadu_si32(first + k * stride); };
  const __m128i pairs = _mm_unpacklo_epi64(_mm_unpacklo_epi32(head(0), head(1)), _mm_unpacklo_epi32(head(2), head(3)));
  return _mm256_cvtph_ps(pairs);
}

// Four floats spread over eight lanes in pairs: lanes 2k and 2k + 1 hold v[k].
KVC_AVX2 inline __m256 pairs_of(__m128 v) {
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(v), _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
}

// The sum of an accumulator's eight lanes, added in row_sums' order: a row's result must not depend on
// whether the thread split sends it through the four-row path or the tail (test_block_kernels checks).
KVC_AVX2 inline float horizontal_sum_of(__m256 acc) {
  const __m256 zero = _mm256_setzero_ps();
  const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(acc, zero), _mm256_hadd_ps(zero, zero));
  return _mm_cvtss_f32(_mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
}

// Four rows' eight partial lanes summed: y[k] = the sum of v_k's lanes.
KVC_AVX2 inline __m128 row_sums(__m256 v0, __m256 v1, __m256 v2, __m256 v3) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(v0, v1), _mm256_hadd_ps(v2, v3));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

}  // namespace kvc::block_lanes
#endif
