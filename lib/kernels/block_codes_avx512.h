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

KVC_AVX512_VNNI inline __m256i nibbles16(const uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0x0F));
}

// Adds 16 to byte j of `codes` where bit j of the 32 bits at p is set.
KVC_AVX512_VNNI inline __m256i with_fifth_bits(__m256i codes, const uint8_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm256_mask_add_epi8(codes, static_cast<__mmask32>(bits), codes, _mm256_set1_epi8(0x10));
}

struct Q4_0 {
  static constexpr int64_t kBytes = 18;
  static constexpr int kOffset = 8;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return nibbles16(b + 2); }
};
struct Q4_1 {
  static constexpr int64_t kBytes = 20;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return nibbles16(b + 4); }
};
struct Q5_0 {
  static constexpr int64_t kBytes = 22;
  static constexpr int kOffset = 16;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return with_fifth_bits(nibbles16(b + 6), b + 2); }
};
struct Q5_1 {
  static constexpr int64_t kBytes = 24;
  static constexpr int kOffset = 0;
  static constexpr bool kMin = true;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) { return with_fifth_bits(nibbles16(b + 8), b + 4); }
};
// Signed codes read as unsigned: w + 128.
struct Q8_0 {
  static constexpr int64_t kBytes = 34;
  static constexpr int kOffset = 128;
  static constexpr bool kMin = false;
  KVC_AVX512_VNNI static __m256i codes(const uint8_t* b) {
    return _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2)), _mm256_set1_epi8(-128));
  }
};


// The eight 6-bit scales and minima of a Q4_K/Q5_K super-block from its 12 packed bytes.
inline void scales_and_mins(const uint8_t* packed, uint8_t scale[8], uint8_t min[8]) {
  for (int j = 0; j < 4; ++j) {
    scale[j] = packed[j] & 63;
    min[j] = packed[j + 4] & 63;
    scale[j + 4] = static_cast<uint8_t>((packed[j + 8] & 15) | ((packed[j] >> 6) << 4));
    min[j + 4] = static_cast<uint8_t>((packed[j + 8] >> 4) | ((packed[j + 4] >> 6) << 4));
  }
}

}  // namespace kvc::block_avx512
#endif
