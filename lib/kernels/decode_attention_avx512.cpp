#include "kernels/decode_attention_avx512.h"

#include "kernels/simd_avx2.h"
#include "kernels/stream_prefetch.h"

#if defined(__x86_64__)
#include <immintrin.h>

// GCC 12's AVX-512 intrinsics pass _mm512_undefined_*() as the unused source of masked builtins, which
// -Wmaybe-uninitialized reports in every file that uses them.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#define KVC_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))

namespace kvc::attention_avx512 {
namespace {

// Sixteen values of a row widened to fp32 (exact for every format: bf16 is the top half of an fp32).
struct Fp32 {
  using Element = float;
  KVC_AVX512 static __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
};
struct Bf16 {
  using Element = uint16_t;
  KVC_AVX512 static __m512 load16(const uint16_t* p) {
    const __m512i wide = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_slli_epi32(wide, 16));
  }
};
struct F16 {
  using Element = uint16_t;
  KVC_AVX512 static __m512 load16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
};

// 16 lanes folded to 8: lanes k and k + 8 added.
KVC_AVX512 inline __m256 folded(__m512 v) {
  return _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
}

// GN queries against KB rows at a time, GN * KB <= 8 sums finished by one transpose-sum. D16: d / 16
// when known at compile time (the loops then unroll), else 0.
template <int D16, int GN, class Rows>
KVC_AVX512 void score(const float* q, const void* keys, int64_t n, int64_t d_runtime, float scale, float* scores,
                      int64_t stride) {
  constexpr int KB = GN == 1 ? 8 : GN == 2 ? 4 : 2;
  const int64_t d = D16 > 0 ? D16 * 16 : d_runtime;
  using Element = typename Rows::Element;
  const Element* rows = static_cast<const Element*>(keys);
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(Element));
  int64_t s = 0;
  for (; s + KB <= n; s += KB) {
    const Element* k = rows + s * d;
    prefetch_ahead(k, KB * row_bytes);
    __m512 acc[GN * KB];
    for (auto& a : acc) a = _mm512_setzero_ps();
    for (int64_t c = 0; c < d; c += 16) {
      __m512 kv[KB];
      for (int i = 0; i < KB; ++i) kv[i] = Rows::load16(k + i * d + c);
      for (int g = 0; g < GN; ++g) {
        const __m512 qv = _mm512_loadu_ps(q + g * d + c);
        for (int i = 0; i < KB; ++i) acc[g * KB + i] = _mm512_fmadd_ps(kv[i], qv, acc[g * KB + i]);
      }
    }
    __m256 half[8];
    for (int j = 0; j < 8; ++j) half[j] = j < GN * KB ? folded(acc[j]) : _mm256_setzero_ps();
    alignas(32) float lane[8];
    _mm256_store_ps(lane, _mm256_mul_ps(simd::transpose_sum8(half), _mm256_set1_ps(scale)));
    for (int g = 0; g < GN; ++g) {
      for (int i = 0; i < KB; ++i) scores[g * stride + s + i] = lane[g * KB + i];
    }
  }
  for (; s < n; ++s) {
    const Element* k = rows + s * d;
    for (int g = 0; g < GN; ++g) {
      __m512 acc = _mm512_setzero_ps();
      for (int64_t c = 0; c < d; c += 16)
        acc = _mm512_fmadd_ps(Rows::load16(k + c), _mm512_loadu_ps(q + g * d + c), acc);
      scores[g * stride + s] = scale * _mm512_reduce_add_ps(acc);
    }
  }
}

// GN queries' weighted sums, 64 columns (four registers each) per pass over the rows: one pass for a
// head_dim of 64.
template <int D16, int GN, class Rows>
KVC_AVX512 void weigh(const float* p, int64_t stride, const void* values, int64_t n, int64_t d_runtime, float* out) {
  constexpr int kTile = 4;
  const int64_t d = D16 > 0 ? D16 * 16 : d_runtime;
  using Element = typename Rows::Element;
  const Element* rows = static_cast<const Element*>(values);
  const int64_t row_bytes = d * static_cast<int64_t>(sizeof(Element));
  for (int64_t c = 0; c < d; c += 16 * kTile) {
    const int tile = static_cast<int>(d - c < 16 * kTile ? (d - c) / 16 : kTile);
    __m512 acc[GN][kTile];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm512_setzero_ps();
    }
    if (tile == kTile) {
      for (int64_t s = 0; s < n; ++s) {
        const Element* v = rows + s * d;
        if (c == 0) prefetch_ahead(v, row_bytes);  // the first pass reads the rows from memory
        __m512 vv[kTile];
        for (int t = 0; t < kTile; ++t) vv[t] = Rows::load16(v + c + 16 * t);
        for (int g = 0; g < GN; ++g) {
          const __m512 w = _mm512_set1_ps(p[g * stride + s]);
          for (int t = 0; t < kTile; ++t) acc[g][t] = _mm512_fmadd_ps(w, vv[t], acc[g][t]);
        }
      }
    } else {  // the last columns of a head_dim that is not a multiple of 64
      for (int64_t s = 0; s < n; ++s) {
        const Element* v = rows + s * d;
        if (c == 0) prefetch_ahead(v, row_bytes);
        for (int t = 0; t < tile; ++t) {
          const __m512 vv = Rows::load16(v + c + 16 * t);
          for (int g = 0; g < GN; ++g) acc[g][t] = _mm512_fmadd_ps(_mm512_set1_ps(p[g * stride + s]), vv, acc[g][t]);
        }
      }
    }
    for (int g = 0; g < GN; ++g) {
      for (int t = 0; t < tile; ++t) _mm512_storeu_ps(out + g * d + c + 16 * t, acc[g][t]);
    }
  }
}

template <int D16, class Rows>
void score_sized(int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale, float* scores,
                 int64_t stride) {
  switch (gn) {
    case 1: return score<D16, 1, Rows>(q, keys, n, d, scale, scores, stride);
    case 2: return score<D16, 2, Rows>(q, keys, n, d, scale, scores, stride);
    case 3: return score<D16, 3, Rows>(q, keys, n, d, scale, scores, stride);
    default: return score<D16, 4, Rows>(q, keys, n, d, scale, scores, stride);
  }
}

template <int D16, class Rows>
void weigh_sized(int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d, float* out) {
  switch (gn) {
    case 1: return weigh<D16, 1, Rows>(p, stride, values, n, d, out);
    case 2: return weigh<D16, 2, Rows>(p, stride, values, n, d, out);
    case 3: return weigh<D16, 3, Rows>(p, stride, values, n, d, out);
    default: return weigh<D16, 4, Rows>(p, stride, values, n, d, out);
  }
}

template <class Rows>
void score_typed(int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale, float* scores,
                 int64_t stride) {
  switch (d) {
    case 64: return score_sized<4, Rows>(gn, q, keys, n, d, scale, scores, stride);
    case 128: return score_sized<8, Rows>(gn, q, keys, n, d, scale, scores, stride);
    case 256: return score_sized<16, Rows>(gn, q, keys, n, d, scale, scores, stride);
    default: return score_sized<0, Rows>(gn, q, keys, n, d, scale, scores, stride);
  }
}

template <class Rows>
void weigh_typed(int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d, float* out) {
  switch (d) {
    case 64: return weigh_sized<4, Rows>(gn, p, stride, values, n, d, out);
    case 128: return weigh_sized<8, Rows>(gn, p, stride, values, n, d, out);
    case 256: return weigh_sized<16, Rows>(gn, p, stride, values, n, d, out);
    default: return weigh_sized<0, Rows>(gn, p, stride, values, n, d, out);
  }
}

}  // namespace

void score_rows(RowType type, int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale,
                float* scores, int64_t stride) {
  switch (type) {
    case RowType::Fp32: return score_typed<Fp32>(gn, q, keys, n, d, scale, scores, stride);
    case RowType::Bf16: return score_typed<Bf16>(gn, q, keys, n, d, scale, scores, stride);
    case RowType::F16: return score_typed<F16>(gn, q, keys, n, d, scale, scores, stride);
  }
}

void weigh_rows(RowType type, int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d,
                float* out) {
  switch (type) {
    case RowType::Fp32: return weigh_typed<Fp32>(gn, p, stride, values, n, d, out);
    case RowType::Bf16: return weigh_typed<Bf16>(gn, p, stride, values, n, d, out);
    case RowType::F16: return weigh_typed<F16>(gn, p, stride, values, n, d, out);
  }
}

}  // namespace kvc::attention_avx512
#else
namespace kvc::attention_avx512 {
void score_rows(RowType, int64_t, const float*, const void*, int64_t, int64_t, float, float*, int64_t) {}
void weigh_rows(RowType, int64_t, const float*, int64_t, const void*, int64_t, int64_t, float*) {}
}  // namespace kvc::attention_avx512
#endif
