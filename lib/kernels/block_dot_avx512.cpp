// The block kernels with AVX-512 VNNI. The 32-value formats' codes as unsigned bytes times the int8
// activations, four products summed per int32 lane in one instruction (vpdpbusd): Q8_0 two blocks per
// 512-bit register, the 4- and 5-bit formats one block per 256-bit register. The K
// formats take two sub-blocks per 512-bit register: products summed in pairs to int16 (vpmaddubsw),
// then times the sub-block scales and summed to int32 in one instruction (vpdpwssd).
#include "kernels/block_dot.h"
#include "kernels/stream_prefetch.h"

#if defined(__x86_64__)
#include "kernels/block_codes_avx512.h"
#include "kernels/block_lanes_avx2.h"

namespace kvc {
namespace {

using namespace block_avx512;

// Each kernel returns a row's partial sums in 16 lanes; rows() adds them up four rows at a time.

// Q8_0 takes two blocks per 512-bit register: their codes (w + 128) times the input (vpdpbusd), the lanes
// starting from minus 128 times the input's sum; the scales of both blocks gathered into one register.
KVC_AVX512_VNNI inline void q8_0_pair(const uint8_t* first, int64_t p, const Q8Row& a, __m512& acc) {
  const __m512i start = _mm512_slli_epi32(_mm512_loadu_si512(a.pair_negsum + 16 * p), 7);
  const __m512i dot = _mm512_dpbusd_epi32(start, pair_codes_q8_0(first), _mm512_loadu_si512(a.q + 64 * p));
  const __m512 d = _mm512_mul_ps(pair_halves<Q8_0>(first, 0), _mm512_loadu_ps(a.pair_d + 16 * p));
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), d, acc);
}

KVC_AVX512_VNNI __m512 dot_q8_0(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  constexpr int64_t kBytes = Q8_0::kBytes;
  __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
  const int64_t pairs = blocks / 2;
  int64_t p = 0;
  // Two pairs per step into two accumulators: one pair's conversion and scaling wait on its
  // vpdpbusd, the other's instructions fill the wait.
  for (; p + 2 <= pairs; p += 2) {
    prefetch_ahead(row + 2 * p * kBytes, 4 * kBytes);
    q8_0_pair(row + 2 * p * kBytes, p, a, acc0);
    q8_0_pair(row + 2 * (p + 1) * kBytes, p + 1, a, acc1);
  }
  if (p < pairs) {
    prefetch_ahead(row + 2 * p * kBytes, 2 * kBytes);
    q8_0_pair(row + 2 * p * kBytes, p, a, acc0);
  }
  __m512 sum = _mm512_add_ps(acc0, acc1);
  if (blocks % 2 != 0) {  // the last block of an odd count, in the low 8 lanes
    const int64_t k = blocks - 1;
    const uint8_t* b = row + k * kBytes;
    const __m256i dot = _mm256_dpbusd_epi32(_mm256_set1_epi32(-16 * a.sum[k]), Q8_0::codes(b),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.q + k * 32)));
    const __m256 products = _mm256_mul_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(half_at(b) * a.d[k]));
    sum = _mm512_add_ps(sum, _mm512_zextps256_ps512(products));
  }
  return sum;
}

// The 4- and 5-bit formats take one block per 256-bit register, four blocks per step, as the AVX2
// kernels do with one vpdpbusd in place of vpmaddubsw and vpmaddwd: unpacking two blocks' nibbles into one
// 512-bit register in value order takes three lane shuffles, which made these kernels slower than AVX2's
// (kvc-bench --block-kernels).

// One block's codes times the activations, as eight float lanes.
template <class F>
KVC_AVX512_VNNI inline __m256 block_products(const uint8_t* b, const int8_t* x) {
  return _mm256_cvtepi32_ps(_mm256_dpbusd_epi32(_mm256_setzero_si256(), F::codes(b),
                                                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x))));
}

// The _0 formats' offset and the _1 formats' minimum both scale the activation block's sum: one product
// per four blocks (lanes 2k + 1 and 2k), kept apart from the codes' sums.
template <class F>
KVC_AVX512_VNNI __m512 dot_q32(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0, sum_terms = acc0;
  int64_t i = 0;
  for (; i + 4 <= blocks; i += 4) {
    const uint8_t* b = row + i * F::kBytes;
    prefetch_ahead(b, 4 * F::kBytes);
    const __m256 halves = block_lanes::leading_halves(b, F::kBytes);
    const __m256 scale = _mm256_mul_ps(halves, block_lanes::pairs_of(_mm_loadu_ps(a.d + i)));
    if constexpr (F::kMin)
      sum_terms = _mm256_fmadd_ps(halves, block_lanes::pairs_of(_mm_loadu_ps(a.dsum + i)), sum_terms);
    if constexpr (F::kOffset != 0) {
      const __m128 sums = _mm_cvtepi32_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.sum + i)));
      sum_terms = _mm256_fnmadd_ps(scale, block_lanes::pairs_of(_mm_mul_ps(sums, _mm_set1_ps(F::kOffset))), sum_terms);
    }
    // Broadcast from memory: a load, where a lane permute would take a shuffle unit per block.
    alignas(32) float scales[8];
    _mm256_store_ps(scales, scale);
    const int8_t* x = a.q + i * 32;
    acc0 = _mm256_fmadd_ps(block_products<F>(b, x), _mm256_broadcast_ss(scales), acc0);
    acc1 = _mm256_fmadd_ps(block_products<F>(b + F::kBytes, x + 32), _mm256_broadcast_ss(scales + 2), acc1);
    acc2 = _mm256_fmadd_ps(block_products<F>(b + 2 * F::kBytes, x + 64), _mm256_broadcast_ss(scales + 4), acc2);
    acc3 = _mm256_fmadd_ps(block_products<F>(b + 3 * F::kBytes, x + 96), _mm256_broadcast_ss(scales + 6), acc3);
  }
  float tail = 0.0f;
  for (; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    const float scale = half_at(b) * a.d[i];
    acc0 = _mm256_fmadd_ps(block_products<F>(b, a.q + i * 32), _mm256_set1_ps(scale), acc0);
    if constexpr (F::kMin) tail += half_at(b + 2) * a.dsum[i];
    if constexpr (F::kOffset != 0) tail -= scale * static_cast<float>(F::kOffset * a.sum[i]);
  }
  __m256 total = _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3));
  // Lanes 2k + 1 of the sum terms hold the minima's products, lanes 2k the offsets'; the others are zeroed.
  if constexpr (F::kMin) total = _mm256_add_ps(total, _mm256_blend_ps(sum_terms, _mm256_setzero_ps(), 0x55));
  if constexpr (F::kOffset != 0) total = _mm256_add_ps(total, _mm256_blend_ps(sum_terms, _mm256_setzero_ps(), 0xAA));
  return _mm512_zextps256_ps512(_mm256_add_ps(total, _mm256_setr_ps(tail, 0, 0, 0, 0, 0, 0, 0)));
}

KVC_AVX512_VNNI inline int32_t mins_dot(uint64_t min8, const int16_t* sum32) {
  const __m128i m = _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(min8)));
  __m128i p = _mm_madd_epi16(m, _mm_loadu_si128(reinterpret_cast<const __m128i*>(sum32)));
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0x4E));
  p = _mm_add_epi32(p, _mm_shuffle_epi32(p, 0xB1));
  return _mm_cvtsi128_si32(p);
}

// int16 lanes 0..15 take scale `first`, lanes 16..31 scale `first` + 1 (of a register of 16-bit scales).
KVC_AVX512_VNNI inline __m512i pair_index(int first) {
  return _mm512_inserti64x4(_mm512_set1_epi16(static_cast<int16_t>(first)),
                            _mm256_set1_epi16(static_cast<int16_t>(first + 1)), 1);
}

template <bool FiveBits>
KVC_AVX512_VNNI __m512 dot_q45_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  const __m512i low4 = _mm512_set1_epi8(0x0F), bit4 = _mm512_set1_epi8(0x10);
  const __m512i index[4] = {pair_index(0), pair_index(2), pair_index(4), pair_index(6)};
  // Sub-blocks 2k and 2k + 1 take bits 2k and 2k + 1 of the high bytes.
  __m512i high_bit[4];
  for (int k = 0; k < 4; ++k) {
    high_bit[k] = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << (2 * k))),
                                     _mm256_set1_epi8(static_cast<char>(1 << (2 * k + 1))), 1);
  }
  __m512 acc = _mm512_setzero_ps();
  float min_sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    prefetch_ahead(b, kBytes);
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    const int8_t* q = a.q + i * 256;
    uint64_t scale8, min8;
    scales_and_mins(b + 4, &scale8, &min8);
    const __m512i scales = _mm512_zextsi128_si512(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<int64_t>(scale8))));
    __m512i high = _mm512_setzero_si512();
    if constexpr (FiveBits) high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16)));
    __m512i sum = _mm512_setzero_si512();
    for (int half = 0; half < 2; ++half) {
      const __m512i bytes = _mm512_loadu_si512(low + 64 * half);  // groups 2 half and 2 half + 1
      const __m512i lo = _mm512_and_si512(bytes, low4), hi = _mm512_and_si512(_mm512_srli_epi16(bytes, 4), low4);
      // Sub-blocks in value order: (lo of the first group, hi of it), (lo of the second, hi of it).
      __m512i v[2] = {_mm512_shuffle_i64x2(lo, hi, 0x44), _mm512_shuffle_i64x2(lo, hi, 0xEE)};
      for (int s = 0; s < 2; ++s) {
        const int k = 2 * half + s;
        if constexpr (FiveBits) v[s] = _mm512_mask_add_epi8(v[s], _mm512_test_epi8_mask(high, high_bit[k]), v[s], bit4);
        const __m512i p = _mm512_maddubs_epi16(v[s], _mm512_loadu_si512(q + 64 * k));
        sum = _mm512_dpwssd_epi32(sum, p, _mm512_permutexvar_epi16(index[k], scales));
      }
    }
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(half_at(b) * a.d[i]), acc);
    min_sum += half_at(b + 2) * a.d[i] * static_cast<float>(mins_dot(min8, a.sum32 + i * 8));
  }
  // The minima's term subtracted in lane 0.
  return _mm512_sub_ps(acc, _mm512_zextps128_ps512(_mm_set_ss(min_sum)));
}

// int16 lanes 8m..8m+7 take scale `first` + m, m < 4.
KVC_AVX512_VNNI inline __m512i quad_index(int first) {
  alignas(64) int16_t idx[32];
  for (int m = 0; m < 32; ++m) idx[m] = static_cast<int16_t>(first + m / 8);
  return _mm512_load_si512(idx);
}

KVC_AVX512_VNNI __m512 dot_q6_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  const __m512i low4 = _mm512_set1_epi8(0x0F), two = _mm512_set1_epi8(0x30);
  const __m512i index[4] = {quad_index(0), quad_index(4), quad_index(8), quad_index(12)};
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 210;
    prefetch_ahead(b, 210);
    const int8_t* q = a.q + i * 256;
    const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 192)));
    const __m512i scales = _mm512_zextsi256_si512(sc16);
    __m512i sum = _mm512_setzero_si512();
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b + 64 * h);
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 128 + 32 * h));
      const __m512i hh = _mm512_inserti64x4(_mm512_zextsi256_si512(hb), _mm256_srli_epi16(hb, 2), 1);
      // Values 0..63 of this half, then 64..127: low 4 bits | high 2 bits at bit 4.
      const __m512i v0 = _mm512_or_si512(_mm512_and_si512(l, low4), _mm512_and_si512(_mm512_slli_epi16(hh, 4), two));
      const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), low4), _mm512_and_si512(hh, two));
      const __m512i p0 = _mm512_maddubs_epi16(v0, _mm512_loadu_si512(q + 128 * h));
      const __m512i p1 = _mm512_maddubs_epi16(v1, _mm512_loadu_si512(q + 128 * h + 64));
      sum = _mm512_dpwssd_epi32(sum, p0, _mm512_permutexvar_epi16(index[2 * h], scales));
      sum = _mm512_dpwssd_epi32(sum, p1, _mm512_permutexvar_epi16(index[2 * h + 1], scales));
    }
    // Codes 0..63 stand for -32..31: take 32 times each scale times its group's activation sum.
    const __m256i offset =
        _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sum16 + i * 16)));
    sum = _mm512_sub_epi32(sum, _mm512_zextsi256_si512(_mm256_slli_epi32(offset, 5)));
    acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_set1_ps(half_at(b + 208) * a.d[i]), acc);
  }
  return acc;
}

// 16 lanes folded to 8: lanes k and k + 8 added.
KVC_AVX512_VNNI inline __m256 folded(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// A row's lanes and four rows' lanes summed in one order (block_lanes_avx2.h), after folding 16 to 8.
KVC_AVX512_VNNI inline float horizontal_sum_of(__m512 v) { return block_lanes::horizontal_sum_of(folded(v)); }
KVC_AVX512_VNNI inline __m128 row_sums(__m512 v0, __m512 v1, __m512 v2, __m512 v3) {
  return block_lanes::row_sums(folded(v0), folded(v1), folded(v2), folded(v3));
}

// A row is a handful of steps in the models served (640 columns: five), so its horizontal sum, a chain
// of shuffles, is shared by four rows.
template <__m512 (*Dot)(const uint8_t*, int64_t, const Q8Row&), int64_t BlockValues>
KVC_AVX512_VNNI void rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const Q8Row& a, float* y, int64_t r0,
                          int64_t r1) {
  const int64_t blocks = cols / BlockValues;
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) {
    const uint8_t* p = w + r * row_bytes;
    const __m512 v0 = Dot(p, blocks, a), v1 = Dot(p + row_bytes, blocks, a), v2 = Dot(p + 2 * row_bytes, blocks, a),
                 v3 = Dot(p + 3 * row_bytes, blocks, a);
    _mm_storeu_ps(y + r, row_sums(v0, v1, v2, v3));
  }
  for (; r < r1; ++r) y[r] = horizontal_sum_of(Dot(w + r * row_bytes, blocks, a));
}

}  // namespace

BlockRowsKernel avx512_block_kernel(BlockType type) {
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
BlockRowsKernel avx512_block_kernel(BlockType) { return nullptr; }
}  // namespace kvc
#endif
