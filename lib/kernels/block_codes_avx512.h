#pragma once
// AVX-512 helpers shared by the block kernels (block_dot_avx512*.cpp): a block's codes unpacked into
// unsigned bytes in value order, and the K formats' packed scales. Every function carries the target
// attribute; call them only when block_isa() is Avx512Vnni.
#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused source of masked builtins, which
// -Wuninitialized reports in every file that uses them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#include <cstdint>
#include <cstring>

#define KVC_AVX512_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace kvc::block_avx512 {

KVC_AVX512_VNNI inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return _cvtsh_ss(h);
}

// 16 bytes -> their low nibbles (values 0..15), then their high nibbles (values 16..31): the bytes loaded
// into both halves (a load, no shuffle unit), the high half shifted by 4.
KVC_AVX512_VNNI inline __m256i nibbles16(const uint8_t* p) {
  const __m256i both = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_and_si256(_mm256_srlv_epi32(both, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
}

// Adds 16 to byte j of `codes` where bit j of the 32 bits at p is set.
KVC_AVX512_VNNI inline __m256i with_fifth_bits(__m256i codes, const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm256_mask_add_epi8(codes, static_cast<__mmask32>(bits), codes, _mm256_set1_epi8(0x10));
}

// Per format: the block's bytes, where its low 4 bits start (kQs) and its fifth bits (kQh, -1 without),
// the offset subtracted from the codes (_0 formats) or whether a half minimum follows d (_1 formats).
struct Q4_0 {
  static constexpr int64_t kBytes = 18;
  static constexpr int kQs = 2, kQh = -1;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return nibbles16(b + 2); }
};
struct Q4_1 {
  static constexpr int64_t kBytes = 20;
  static constexpr int kQs = 4, kQh = -1;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return nibbles16(b + 4); }
};
struct Q5_0 {
  static constexpr int64_t kBytes = 22;
  static constexpr int kQs = 6, kQh = 2;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return with_fifth_bits(nibbles16(b + 6), b + 2); }
};
struct Q5_1 {
  static constexpr int64_t kBytes = 24;
  static constexpr int kQs = 8, kQh = 4;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return with_fifth_bits(nibbles16(b + 8), b + 4); }
};
// Signed codes read as unsigned: w + 128.
struct Q8_0 {
  static constexpr int64_t kBytes = 34;
  static constexpr int kQs = 2, kQh = -1;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), _mm256_set1_epi8(-128));
  }
};

// Two Q8_0 blocks' codes as unsigned bytes (w + 128): the first block's 32 in the low half.
KVC_AVX512_VNNI inline __m512i pair_codes_q8_0(const uint8_t* first) {
  const __m512i w =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + 2))),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + Q8_0::kBytes + 2)), 1);
  return _mm512_xor_si512(w, _mm512_set1_epi8(-128));
}

// The half at word `word` of two blocks' bytes (first block at word 0, the second at F::kBytes / 2),
// as 16 fp32 lanes: 8 of the first block's, 8 of the second's. The load is masked to the two blocks.
template <class F>
KVC_AVX512_VNNI inline __m512 pair_halves(const uint8_t* first, int word) {
  constexpr int kWords = F::kBytes < 32 ? static_cast<int>(F::kBytes) : 32;  // two blocks, in 16-bit words
  const __m512i raw = _mm512_maskz_loadu_epi16(static_cast<__mmask32>((uint64_t{1} << kWords) - 1), first);
  const __m256i index = _mm256_inserti128_si256(_mm256_set1_epi16(static_cast<int16_t>(word)),
                                                _mm_set1_epi16(static_cast<int16_t>(word + F::kBytes / 2)), 1);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_zextsi256_si512(index), raw)));
}

// The eight 6-bit scales and minima of a Q4_K/Q5_K super-block from its 12 packed bytes, as two
// 64-bit words of bytes: scales 0..7, minima 0..7. Scales and minima 0..3 are the low 6 bits of bytes
// 0..3 and 4..7; 4..7 take their low 4 bits from bytes 8..11 (low, high nibble) and their top 2
// from the top bits of bytes 0..3 (scales) and 4..7 (minima).
inline void scales_and_mins(const uint8_t* packed, uint64_t* scales, uint64_t* mins) {
  uint32_t a, b, c;
  std::memcpy(&a, packed, 4);
  std::memcpy(&b, packed + 4, 4);
  std::memcpy(&c, packed + 8, 4);
  const uint32_t scale_hi = (c & 0x0F0F0F0Fu) | (((a >> 6) & 0x03030303u) << 4);
  const uint32_t min_hi = ((c >> 4) & 0x0F0F0F0Fu) | (((b >> 6) & 0x03030303u) << 4);
  *scales = (a & 0x3F3F3F3Fu) | (static_cast<uint64_t>(scale_hi) << 32);
  *mins = (b & 0x3F3F3F3Fu) | (static_cast<uint64_t>(min_hi) << 32);
}

}  // namespace kvc::block_avx512
#endif
