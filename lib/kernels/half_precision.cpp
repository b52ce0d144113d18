#include "kernels/half_precision.h"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <atomic>
#include <type_traits>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

template <typename Half>
void widen_portable(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const Half*>(src);
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s[i]);
}

template <typename Half>
float dot_portable(const void* w, const float* x, int64_t n) {
  const auto* s = static_cast<const Half*>(w);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<float>(s[i]) * x[i];
  return sum;
}

// The scalar type of a 16-bit format, for the portable code and the vectors' tails.
template <bool Bf16>
using Scalar = std::conditional_t<Bf16, c10::BFloat16, c10::Half>;

#if defined(__x86_64__)
template <bool Bf16>
using Rows = std::conditional_t<Bf16, simd::Bf16Rows, simd::F16Rows>;

template <bool Bf16>
KVC_AVX2 void widen_avx2(const void* src, float* dst, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, Rows<Bf16>::load8(s + i));
  if (i < n) widen_portable<Scalar<Bf16>>(s + i, dst + i, n - i);
}

// Four accumulators over 32 values per step, as the fp32 matrix-vector kernel.
template <bool Bf16>
KVC_AVX2 float dot_avx2(const void* w, const float* x, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(w);
  const int64_t n32 = n / 32 * 32, n8 = n / 8 * 8;
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j < n32; j += 32) {
    a0 = _mm256_fmadd_ps(Rows<Bf16>::load8(s + j), _mm256_loadu_ps(x + j), a0);
    a1 = _mm256_fmadd_ps(Rows<Bf16>::load8(s + j + 8), _mm256_loadu_ps(x + j + 8), a1);
    a2 = _mm256_fmadd_ps(Rows<Bf16>::load8(s + j + 16), _mm256_loadu_ps(x + j + 16), a2);
    a3 = _mm256_fmadd_ps(Rows<Bf16>::load8(s + j + 24), _mm256_loadu_ps(x + j + 24), a3);
  }
  for (; j < n8; j += 8) a0 = _mm256_fmadd_ps(Rows<Bf16>::load8(s + j), _mm256_loadu_ps(x + j), a0);
  float sum = simd::horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  if (j < n) sum += dot_portable<Scalar<Bf16>>(s + j, x + j, n - j);
  return sum;
}

#define KVC_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))

template <bool Bf16>
KVC_AVX512 __m512 load16(const uint16_t* p) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (Bf16) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  } else {
    return _mm512_cvtph_ps(raw);
  }
}

// Half the instructions of the AVX2 loop per weight: with two cores, widening in registers is what
// limits a decode step, not memory.
template <bool Bf16>
KVC_AVX512 float dot_avx512(const void* w, const float* x, int64_t n) {
  const auto* s = static_cast<const uint16_t*>(w);
  const int64_t n64 = n / 64 * 64, n16 = n / 16 * 16;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t j = 0;
  for (; j < n64; j += 64) {
    a0 = _mm512_fmadd_ps(load16<Bf16>(s + j), _mm512_loadu_ps(x + j), a0);
    a1 = _mm512_fmadd_ps(load16<Bf16>(s + j + 16), _mm512_loadu_ps(x + j + 16), a1);
    a2 = _mm512_fmadd_ps(load16<Bf16>(s + j + 32), _mm512_loadu_ps(x + j + 32), a2);
    a3 = _mm512_fmadd_ps(load16<Bf16>(s + j + 48), _mm512_loadu_ps(x + j + 48), a3);
  }
  for (; j < n16; j += 16) a0 = _mm512_fmadd_ps(load16<Bf16>(s + j), _mm512_loadu_ps(x + j), a0);
  float sum = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  if (j < n) sum += dot_portable<Scalar<Bf16>>(s + j, x + j, n - j);
  return sum;
}
#endif

std::atomic<HalfPrecisionIsa> isa_limit{HalfPrecisionIsa::Best};

bool has_avx512() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
  return has && isa_limit.load(std::memory_order_relaxed) == HalfPrecisionIsa::Best;
#else
  return false;
#endif
}

bool has_avx2() {
  return cpu_has_avx2_fma() && isa_limit.load(std::memory_order_relaxed) != HalfPrecisionIsa::Portable;
}

}  // namespace

void limit_half_precision_isa(HalfPrecisionIsa isa) { isa_limit.store(isa); }

bool is_half_type(at::ScalarType type) { return type == at::kBFloat16 || type == at::kHalf; }

namespace {

template <typename Half>
void narrow_portable(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<Half*>(dst);
  for (int64_t i = 0; i < n; ++i) d[i] = Half(src[i]);
}

#if defined(__x86_64__)
// Eight fp32 values rounded to the nearest 16-bit value, ties to even, as LibTorch's conversion rounds
// them (bf16: NaN becomes the quiet NaN 0x7FC0).
template <bool Bf16>
KVC_AVX2 __m128i narrow8(__m256 v) {
  if constexpr (Bf16) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    r = _mm256_blendv_epi8(r, _mm256_set1_epi32(0x7FC0), _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08));
  } else {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
}

template <bool Bf16>
KVC_AVX2 void narrow_avx2(const float* src, void* dst, int64_t n) {
  auto* d = static_cast<uint16_t*>(dst);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), narrow8<Bf16>(_mm256_loadu_ps(src + i)));
  }
  if (i < n) narrow_portable<Scalar<Bf16>>(src + i, d + i, n - i);
}
#endif

}  // namespace

void float_to_half(at::ScalarType type, const float* src, void* dst, int64_t n) {
  const bool bf16 = type == at::kBFloat16;
#if defined(__x86_64__)
  if (has_avx2()) return bf16 ? narrow_avx2<true>(src, dst, n) : narrow_avx2<false>(src, dst, n);
#endif
  bf16 ? narrow_portable<c10::BFloat16>(src, dst, n) : narrow_portable<c10::Half>(src, dst, n);
}

void half_to_float(at::ScalarType type, const void* src, float* dst, int64_t n) {
  const bool bf16 = type == at::kBFloat16;
#if defined(__x86_64__)
  if (has_avx2()) return bf16 ? widen_avx2<true>(src, dst, n) : widen_avx2<false>(src, dst, n);
#endif
  bf16 ? widen_portable<c10::BFloat16>(src, dst, n) : widen_portable<c10::Half>(src, dst, n);
}

namespace {

template <float (*Dot)(const void*, const float*, int64_t)>
void rows_with(const void* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
  const auto* rows = static_cast<const uint16_t*>(w);
  for (int64_t r = r0; r < r1; ++r) y[r] = Dot(rows + r * n, x, n);
}

}  // namespace

void half_matvec_rows(at::ScalarType type, const void* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
  const bool bf16 = type == at::kBFloat16;
#if defined(__x86_64__)
  if (has_avx512()) {
    return bf16 ? rows_with<dot_avx512<true>>(w, x, y, r0, r1, n) : rows_with<dot_avx512<false>>(w, x, y, r0, r1, n);
  }
  if (has_avx2()) {
    return bf16 ? rows_with<dot_avx2<true>>(w, x, y, r0, r1, n) : rows_with<dot_avx2<false>>(w, x, y, r0, r1, n);
  }
#endif
  bf16 ? rows_with<dot_portable<c10::BFloat16>>(w, x, y, r0, r1, n)
       : rows_with<dot_portable<c10::Half>>(w, x, y, r0, r1, n);
}

}  // namespace kvc
