// The block kernels with AVX2: a block's codes are unpacked into 32 unsigned bytes in value order, whose
// products with the int8 activations are summed in pairs to int16 (vpmaddubsw) and then to int32
// (vpmaddwd, which also applies the K formats' sub-block scales). The _0 formats' offset is taken out
// with the activation block's sum instead of being subtracted from every code.
#include "kernels/block_dot.h"
#include "kernels/stream_prefetch.h"

#if defined(__x86_64__)
#include <algorithm>
#include <cstring>

#include "kernels/block_lanes_avx2.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

using namespace block_lanes;

KVC_AVX2 inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

KVC_AVX2 inline __m256i nibbles16(const uint8_t* p) {
  // 16 bytes -> their low nibbles (values 0..15), then their high nibbles (values 16..31).
  // The 16 bytes loaded into both halves (a load, no shuffle unit), the high half shifted by 4.
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
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
  static constexpr bool kSigned = false;
  static constexpr int64_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return nibbles16(b + 2); }
};
struct Q4_1 {
  static constexpr bool kSigned = false;
  static constexpr int64_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return nibbles16(b + 4); }
};
struct Q5_0 {
  static constexpr bool kSigned = false;
  static constexpr int64_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return _mm256_or_si256(nibbles16(b + 6), fifth_bits(b + 2)); }
};
struct Q5_1 {
  static constexpr bool kSigned = false;
  static constexpr int64_t kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX2 static __m256i codes(const uint8_t* b) { return _mm256_or_si256(nibbles16(b + 8), fifth_bits(b + 4)); }
};

// Q8_0's codes are signed: vpmaddubsw takes |w| and the activations with w's sign.
struct Q8_0 {
  static constexpr bool kSigned = true;
  static constexpr int64_t kBytes = 34;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = false;
  KVC_AVX2 static __m256i codes(const uint8_t* b) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2));
  }
};

// Each row is read front to back, as the hardware prefetchers expect of a stream (several rows read in
// step fell behind them when the weights come from memory). The 32-value formats take four blocks per
// step: their half scales widened by one conversion, four independent accumulators.

// One block's codes times the activations: eight int32 lanes.
template <class F>
KVC_AVX2 inline __m256i block_dot(const uint8_t* b, const int8_t* x) {
  const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x));
  if constexpr (F::kSigned) {
    const __m256i w = F::codes(b);
    return pair_sums(_mm256_sign_epi8(w, w), _mm256_sign_epi8(xv, w));
  } else {
    return pair_sums(F::codes(b), xv);
  }
}

// A row of a 32-value format (Q8_0 included). The _0 formats' offset and the _1 formats' minimum both
// scale the activation block's sum: one product per four blocks (lanes 2k + 1 and 2k), kept apart from
// the codes' sums.
template <class F>
KVC_AVX2 inline __m256 dot_q32(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, sum_terms = acc0;
  int64_t i = 0;
  for (; i + 4 <= blocks; i += 4) {
    const uint8_t* b = row + i * F::kBytes;
    prefetch_ahead(b, 4 * F::kBytes);
    const __m256 halves = leading_halves(b, F::kBytes);
    const __m256 scale = _mm256_mul_ps(halves, pairs_of(_mm_loadu_ps(a.d + i)));
    if constexpr (F::kMin) sum_terms = _mm256_fmadd_ps(halves, pairs_of(_mm_loadu_ps(a.dsum + i)), sum_terms);
    if constexpr (F::kOffset != 0) {
      const __m128 sums = _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sum + i)));
      sum_terms = _mm256_fnmadd_ps(scale, pairs_of(_mm_mul_ps(sums, _mm_set1_ps(F::kOffset))), sum_terms);
    }
    // Broadcast from memory: a load, where a lane permute would take a shuffle unit per block.
    alignas(32) float scales[8];
    _mm256_store_ps(scales, scale);
    const int8_t* x = a.q + i * 32;
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(b, x)), _mm256_broadcast_ss(scales), acc0);
    acc1 =
        _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(b + F::kBytes, x + 32)), _mm256_broadcast_ss(scales + 2), acc1);
    acc2 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(b + 2 * F::kBytes, x + 64)), _mm256_broadcast_ss(scales + 4),
                           acc2);
    acc3 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(b + 3 * F::kBytes, x + 96)), _mm256_broadcast_ss(scales + 6),
                           acc3);
  }
  float tail = 0.0f;
  for (; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    const float scale = half_at(b) * a.d[i];
    acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(block_dot<F>(b, a.q + i * 32)), _mm256_set1_ps(scale), acc0);
    if constexpr (F::kMin) tail += half_at(b + 2) * a.dsum[i];
    if constexpr (F::kOffset != 0) tail -= scale * static_cast<float>(F::kOffset * a.sum[i]);
  }
  __m256 total = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  // Lanes 2k + 1 of the sum terms hold the minima's products, lanes 2k the offsets'; the others are zeroed.
  if constexpr (F::kMin) total = _mm256_add_ps(total, _mm256_blend_ps(sum_terms, _mm256_setzero_ps(), 0x55));
  if constexpr (F::kOffset != 0) total = _mm256_add_ps(total, _mm256_blend_ps(sum_terms, _mm256_setzero_ps(), 0xAA));
  return _mm256_add_ps(total, _mm256_setr_ps(tail, 0, 0, 0, 0, 0, 0, 0));
}

// The eight 6-bit scales (bytes 0..7) and minima (bytes 8..15) of a Q4_K/Q5_K super-block, widened to
// 16 bits: scales j < 4 and minima j < 4 are the low 6 bits of bytes j and j + 4; j >= 4 take their
// low 4 bits from byte j + 4 (scale: low nibble, minimum: high nibble) and their top 2 bits from the
// top of bytes j - 4 and j.
KVC_AVX2 inline __m256i scales_and_mins(const uint8_t* packed) {
  uint32_t w[3];
  std::memcpy(w, packed, sizeof w);
  const uint32_t scales_lo = w[0] & 0x3F3F3F3F, mins_lo = w[1] & 0x3F3F3F3F;
  const uint32_t scales_hi = (w[2] & 0x0F0F0F0F) | (((w[0] >> 6) & 0x03030303) << 4);
  const uint32_t mins_hi = ((w[2] >> 4) & 0x0F0F0F0F) | (((w[1] >> 6) & 0x03030303) << 4);
  return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(mins_hi), static_cast<int>(mins_lo),
                                            static_cast<int>(scales_hi), static_cast<int>(scales_lo)));
}

template <bool FiveBits>
KVC_AVX2 inline __m256 dot_q45_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  const __m256i low4 = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  // Shuffles that spread scale k (16 bits) over all 16 lanes of a 128-bit half.
  const __m256i spread[8] = {_mm256_set1_epi16(0x0100), _mm256_set1_epi16(0x0302), _mm256_set1_epi16(0x0504),
                             _mm256_set1_epi16(0x0706), _mm256_set1_epi16(0x0908), _mm256_set1_epi16(0x0B0A),
                             _mm256_set1_epi16(0x0D0C), _mm256_set1_epi16(0x0F0E)};
  __m256 acc = _mm256_setzero_ps();
  __m128 acc_min = _mm_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const int8_t* q = a.q + i * 256;
    const __m128i sum32 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sum32 + i * 8));
    const float ad = a.d[i];
    const uint8_t* b = row + i * kBytes;
    prefetch_ahead(b, kBytes);
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    const __m256i sm = scales_and_mins(b + 4);
    const __m128i scales128 = _mm256_castsi256_si128(sm);
    const __m256i scales = _mm256_inserti128_si256(_mm256_castsi128_si256(scales128), scales128, 1);
    // The minima's term: sum over sub-blocks of min * (activation sum of the sub-block).
    const __m128i mins = _mm_madd_epi16(_mm256_extracti128_si256(sm, 1), sum32);
    acc_min = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(half_at(b + 2) * ad), acc_min);
    const __m256i high =
        FiveBits ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)) : _mm256_setzero_si256();
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
      const __m256i p1 =
          _mm256_maddubs_epi16(v1, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 64 * g + 32)));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(scales, spread[2 * g])));
      sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(scales, spread[2 * g + 1])));
    }
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(half_at(b) * ad), acc);
  }
  // The minima's four lanes subtracted from the low half.
  return _mm256_sub_ps(acc, _mm256_insertf128_ps(_mm256_setzero_ps(), acc_min, 0));
}

KVC_AVX2 inline __m256 dot_q6_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
  // Run k of a half takes scale 2k of that half in its low 128 bits and 2k + 1 in its high 128 bits.
  const __m256i spread[4] = {
      _mm256_setr_epi64x(0x0100010001000100, 0x0100010001000100, 0x0302030203020302, 0x0302030203020302),
      _mm256_setr_epi64x(0x0504050405040504, 0x0504050405040504, 0x0706070607060706, 0x0706070607060706),
      _mm256_setr_epi64x(0x0908090809080908, 0x0908090809080908, 0x0B0A0B0A0B0A0B0A, 0x0B0A0B0A0B0A0B0A),
      _mm256_setr_epi64x(0x0D0C0D0C0D0C0D0C, 0x0D0C0D0C0D0C0D0C, 0x0F0E0F0E0F0E0F0E, 0x0F0E0F0E0F0E0F0E)};
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const int8_t* q = a.q + i * 256;
    const __m256i group_sums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum16 + i * 16));
    const float ad = a.d[i];
    const uint8_t* b = row + i * 210;
    prefetch_ahead(b, 210);
    // The sixteen int8 scales (one per 16 values) widened: scales 0..7 in the low half, 8..15 high.
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    const __m256i halves[2] = {_mm256_permute2x128_si256(sc16, sc16, 0x00),
                               _mm256_permute2x128_si256(sc16, sc16, 0x11)};
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
        const __m256i p =
            _mm256_maddubs_epi16(v[k], _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 128 * h + 32 * k)));
        sum = _mm256_add_epi32(sum, _mm256_madd_epi16(p, _mm256_shuffle_epi8(halves[h], spread[k])));
      }
    }
    // The codes are 0..63 for values -32..31: 32 times each scale times its group's activation sum.
    const __m256i offset = _mm256_madd_epi16(sc16, group_sums);
    sum = _mm256_sub_epi32(sum, _mm256_slli_epi32(offset, 5));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(half_at(b + 208) * ad), acc);
  }
  return acc;
}

// A row is a handful of 4-block steps in the models served (640 columns: five), so its horizontal sum is
// shared by four rows.
template <__m256 (*Dot)(const uint8_t*, int64_t, const Q8Row&), int64_t BlockValues>
KVC_AVX2 void rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const Q8Row& a, float* y, int64_t r0,
                   int64_t r1) {
  const int64_t blocks = cols / BlockValues;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* p = w + r * row_bytes;
    const __m256 v0 = Dot(p, blocks, a), v1 = Dot(p + row_bytes, blocks, a), v2 = Dot(p + 2 * row_bytes, blocks, a),
                 v3 = Dot(p + 3 * row_bytes, blocks, a);
    _mm_storeu_ps(y + r, row_sums(v0, v1, v2, v3));
  }
  for (; r < r1; ++r) y[r] = horizontal_sum_of(Dot(w + r * row_bytes, blocks, a));
}

}  // namespace

BlockRowsKernel avx2_block_kernel(BlockType type) {
  switch (type) {
    case BlockType::Q4_0: return rows<dot_q32<Q4_0>, 32>;
    case BlockType::Q4_1: return rows<dot_q32<Q4_1>, 32>;
    case BlockType::Q5_0: return rows<dot_q32<Q5_0>, 32>;
    case BlockType::Q5_1: return rows<dot_q32<Q5_1>, 32>;
    case BlockType::Q8_0: return rows<dot_q32<Q8_0>, 32>;
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
