// The block kernels with AVX2: a block's codes are unpacked into 32 unsigned bytes in value order, whose
// products with the int8 activations are summed in pairs to int16 (vpmaddubsw) and then to int32
// (vpmaddwd, which also applies the K formats' sub-block scales). The _0 formats' offset is taken out
// with the activation block's sum instead of being subtracted from every code.
#include "kernels/block_dot.h"

#if defined(__x86_64__)
#include <cstring>

#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

KVC_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

KVC_AVX2 inline __m256i nibbles16(const uint8_t* p) {
  // 16 bytes -> their low nibbles (values 0..15), then their high nibbles (values 16..31).
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

// 32 bits -> 32 bytes, byte j 0x10 where bit j is set.
KVC_AVX2 inline __m256i fifth_bits(const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi64x(0x0000000000000000, 0x0101010101010101, 0x0202020202020202, 0x0303030303030303));
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit), _mm256_set1_epi8(0x10));
}

KVC_AVX2 inline __m256i pair_sums(__m256i u8, __m256i s8) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u8, s8), _mm256_set1_epi16(1));
}

// Per format: the block's bytes, its codes as unsigned bytes, and what is subtracted from them.
struct Q4_0 {
  static constexpr int64_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return nibbles16(b + 2); }
};
struct Q4_1 {
  static constexpr int64_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return nibbles16(b + 4); }
};
struct Q5_0 {
  static constexpr int64_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return _mm256_or_si256(nibbles16(b + 6), fifth_bits(b + 2)); }
};
struct Q5_1 {
  static constexpr int64_t kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return _mm256_or_si256(nibbles16(b + 8), fifth_bits(b + 4)); }
};

template <class F>
KVC_AVX2 float dot_q32(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  __m256 acc = _mm256_setzero_ps();
  float min_sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    __m256i dot = pair_sums(F::codes(b), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + i * 32)));
    // The offset times the activations' sum, an eighth in each of the eight lanes.
    if constexpr (F::kOffset != 0) dot = _mm256_sub_epi32(dot, _mm256_set1_epi32(F::kOffset / 8 * a.sum[i]));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half_at(b) * a.d[i]), acc);
    if constexpr (F::kMin) min_sum += half_at(b + 2) * a.dsum[i];
  }
  return simd::horizontal_sum(acc) + min_sum;
}

// Q8_0's codes are signed: vpmaddubsw takes |w| and the activations with w's sign.
KVC_AVX2 float dot_q8_0(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 34;
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + i * 32));
    const __m256i dot = pair_sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half_at(b) * a.d[i]), acc);
  }
  return simd::horizontal_sum(acc);
}

// The eight 6-bit scales and minima of a Q4_K/Q5_K super-block.
inline void scales_and_mins(const uint8_t* packed, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = packed[j] & 63;
    min[j] = packed[j + 4] & 63;
    scale[j + 4] = static_cast<uint8_t>((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
    min[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

// The minima's term: sum over sub-blocks of min * (activation sum of the sub-block).
KVC_AVX2 inline int32_t mins_dot(const uint8_t min[8], const int16_t* sum32) {
  const __m128i m = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(min)));
  __m128i p = _mm_madd_epi16(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sum32)));
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
  return _mm_cvtsi128_si32(p);
}

template <bool FiveBits>
KVC_AVX2 float dot_q45_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  __m256 acc = _mm256_setzero_ps();
  float min_sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    const int8_t* q = a.q + i * 256;
    uint8_t scale[8], min[8];
    scales_and_mins(b + 4, scale, min);
    const __m256i high = FiveBits ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)) : _mm256_setzero_si256();
    __m256i sum = _mm256_setzero_si256();
    for (int g = 0; g < 4; ++g) {
      const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + 32 * g));
      __m256i v0 = _mm256_and_si256(bytes, low4), v1 = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), low4);
      if constexpr (FiveBits) {
        // Bit 2g (and 2g + 1) of each high byte moved to bit 4.
        v0 = _mm256_or_si256(v0, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(high, 2 * g), 4), bit4));
        v1 = _mm256_or_si256(v1, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(high, 2 * g + 1), 4), bit4));
      }
      const __m256i p0 = _mm256_maddubs_epi16(v0, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * g)));
      const __m256i p1 = _mm256_maddubs_epi16(v1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * g + 32)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p0, _mm256_set1_epi16(scale[2 * g])));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p1, _mm256_set1_epi16(scale[2 * g + 1])));
    }
    const float d = half_at(b) * a.d[i];
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(d), acc);
    min_sum += half_at(b + 2) * a.d[i] * static_cast<float>(mins_dot(min, a.sum32 + i * 8));
  }
  return simd::horizontal_sum(acc) - min_sum;
}

KVC_AVX2 float dot_q6_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 210;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const int8_t* q = a.q + i * 256;
    __m256i sum = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * h + 32));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      // The four runs of 32 values: low 4 bits | high 2 bits at bit 4.
      const __m256i v[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 4), two)),
          _mm256_or_si256(_mm256_and_si256(l1, low4), _mm256_and_si256(_mm256_slli_epi16(hb, 2), two)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low4), _mm256_and_si256(hb, two)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low4),
                          _mm256_and_si256(_mm256_srli_epi16(hb, 2), two)),
      };
      for (int k = 0; k < 4; ++k) {
        const int s = 8 * h + 2 * k;  // the scales of the run's two groups of 16
        const __m256i p = _mm256_maddubs_epi16(v[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128 * h + 32 * k)));
        const __m256i sc = _mm256_set_m128i(_mm_set1_epi16(scales[s + 1]), _mm_set1_epi16(scales[s]));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, sc));
      }
    }
    // The codes are 0..63 for values -32..31: 32 times each scale times its group's activation sum.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
    const __m256i offset = _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum16 + i * 16)));
    sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(half_at(b + 208) * a.d[i]), acc);
  }
  return simd::horizontal_sum(acc);
}

template <float (*Dot)(const uint8_t*, int64_t, const Q8Row&), int64_t BlockValues>
void rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const Q8Row& a, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) y[r] = Dot(w + r * row_bytes, cols / BlockValues, a);
}

}  // namespace

BlockRowsKernel avx2_block_kernel(BlockType type) {
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
BlockRowsKernel avx2_block_kernel(BlockType) { return nullptr; }
}  // namespace kvc
#endif
