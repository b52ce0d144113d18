#include "kernels/block_panels.h"

#include <cstring>

namespace kvc {

void pack_tokens(const Q8Rows& x, int64_t first, int64_t count, TokenPanel& panel) {
  const int64_t cols = x.cols(), steps = cols / 4, blocks = cols / 32, groups = cols / 16;
  panel.q.assign(static_cast<size_t>(steps * kPanelTokens * 4), 0);
  panel.d.assign(static_cast<size_t>(blocks * kPanelTokens), 0.0f);
  panel.dsum32.assign(static_cast<size_t>(blocks * kPanelTokens), 0.0f);
  panel.dsum16.assign(static_cast<size_t>(groups * kPanelTokens), 0.0f);
  for (int64_t t = 0; t < count; ++t) {
    const Q8Row row = x.row(first + t);
    for (int64_t s = 0; s < steps; ++s)
      std::memcpy(&panel.q[static_cast<size_t>((s * kPanelTokens + t) * 4)], row.q + 4 * s, 4);
    for (int64_t b = 0; b < blocks; ++b) {
      panel.d[static_cast<size_t>(b * kPanelTokens + t)] = row.d[b];
      panel.dsum32[static_cast<size_t>(b * kPanelTokens + t)] = row.dsum[b];
    }
    for (int64_t g = 0; g < groups; ++g) {
      panel.dsum16[static_cast<size_t>(g * kPanelTokens + t)] = row.d[g / 2] * static_cast<float>(row.sum16[g]);
    }
  }
}

}  // namespace kvc

#if defined(__x86_64__)
#include <algorithm>

#include "kernels/block_codes_avx512.h"

namespace kvc {
namespace {

using namespace block_avx512;

template <class F>
KVC_AVX512_VNNI void unpack_q32(const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, UnpackedRows& out) {
  const int64_t blocks = cols / 32;
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    uint8_t* codes = out.codes.data() + r * cols;
    float* scale = out.scale.data() + r * blocks;
    float* bias = out.bias.data() + r * blocks;
    for (int64_t i = 0; i < blocks; ++i) {
      const uint8_t* b = row + i * F::kBytes;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 32 * i), F::codes(b));
      const float d = half_at(b);
      scale[i] = d;
      bias[i] = F::kMin ? half_at(b + 2) : -static_cast<float>(F::kOffset) * d;
    }
  }
}

template <bool FiveBits>
KVC_AVX512_VNNI void unpack_q45_k(const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, UnpackedRows& out) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const int64_t blocks = cols / 256;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < blocks; ++i) {
      const uint8_t* b = w + r * row_bytes + i * kBytes;
      const uint8_t* low = b + (FiveBits ? 48 : 16);
      uint8_t* codes = out.codes.data() + r * cols + 256 * i;
      float* scale = out.scale.data() + r * (cols / 32) + 8 * i;
      float* bias = out.bias.data() + r * (cols / 32) + 8 * i;
      uint64_t scale8, min8;
      scales_and_mins(b + 4, &scale8, &min8);
      uint8_t sc[8], m[8];
      std::memcpy(sc, &scale8, 8);
      std::memcpy(m, &min8, 8);
      const float d = half_at(b), dmin = half_at(b + 2);
      const __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16));
      for (int j = 0; j < 8; ++j) {
        const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + 32 * (j / 2)));
        __m256i c = _mm256_and_si256(j % 2 ? _mm256_srli_epi16(bytes, 4) : bytes, low4);
        if constexpr (FiveBits) {
          const __mmask32 bit = _mm256_test_epi8_mask(high, _mm256_set1_epi8(static_cast<char>(1 << j)));
          c = _mm256_mask_add_epi8(c, bit, c, _mm256_set1_epi8(0x10));
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 32 * j), c);
        scale[j] = d * sc[j];
        bias[j] = -dmin * m[j];
      }
    }
  }
}

KVC_AVX512_VNNI void unpack_q6_k(const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, UnpackedRows& out) {
  const __m256i low4 = _mm256_set1_epi8(0x0F), two = _mm256_set1_epi8(0x30);
  const int64_t blocks = cols / 256;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < blocks; ++i) {
      const uint8_t* b = w + r * row_bytes + i * 210;
      const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
      const float d = half_at(b + 208);
      uint8_t* codes = out.codes.data() + r * cols + 256 * i;
      float* scale = out.scale.data() + r * (cols / 16) + 16 * i;
      float* bias = out.bias.data() + r * (cols / 16) + 16 * i;
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
        for (int k = 0; k < 4; ++k) _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + 128 * h + 32 * k), v[k]);
      }
      for (int g = 0; g < 16; ++g) {
        scale[g] = d * sc[g];
        bias[g] = -32.0f * d * sc[g];
      }
    }
  }
}

KVC_AVX512_VNNI inline __m512i broadcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm512_set1_epi32(v);
}

// R rows (from `first`) times the panel's 16 tokens: out[i] lane t = row first + i times token t.
template <int R, int Steps>
KVC_AVX512_VNNI void rows_times_panel(const UnpackedRows& w, int64_t first, const TokenPanel& p, __m512 out[R]) {
  constexpr int64_t kGroup = 4 * Steps;
  const int64_t groups = w.cols / kGroup;
  const uint8_t* codes[R];
  const float* scale[R];
  const float* bias[R];
  __m512 acc[R];
  for (int i = 0; i < R; ++i) {
    codes[i] = w.codes.data() + (first + i) * w.cols;
    scale[i] = w.scale.data() + (first + i) * groups;
    bias[i] = w.bias.data() + (first + i) * groups;
    acc[i] = _mm512_setzero_ps();
  }
  const int8_t* q = p.q.data();
  const float* dsum = kGroup == 32 ? p.dsum32.data() : p.dsum16.data();
  for (int64_t g = 0; g < groups; ++g) {
    __m512i dot[R];
    for (int i = 0; i < R; ++i) dot[i] = _mm512_setzero_si512();
    for (int k = 0; k < Steps; ++k) {
      const int64_t step = g * Steps + k;
      const __m512i a = _mm512_loadu_si512(q + 64 * step);
      for (int i = 0; i < R; ++i) dot[i] = _mm512_dpbusd_epi32(dot[i], broadcast4(codes[i] + 4 * step), a);
    }
    const __m512 d = _mm512_loadu_ps(p.d.data() + 16 * (g * kGroup / 32));
    const __m512 ds = _mm512_loadu_ps(dsum + 16 * g);
    for (int i = 0; i < R; ++i) {
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot[i]), _mm512_mul_ps(_mm512_set1_ps(scale[i][g]), d), acc[i]);
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(bias[i][g]), ds, acc[i]);
    }
  }
  for (int i = 0; i < R; ++i) out[i] = acc[i];
}

template <int Steps>
KVC_AVX512_VNNI void products(const UnpackedRows& w, int64_t r0, int64_t r1, const TokenPanel& panel, int64_t tokens,
                              float* y, int64_t y_stride, int64_t column0, const int32_t* out_rows) {
  constexpr int kRows = 4;
  alignas(64) float column[kRows][kPanelTokens];
  for (int64_t r = r0; r < r1; r += kRows) {
    const int n = static_cast<int>(std::min<int64_t>(kRows, r1 - r));
    __m512 out[kRows];
    switch (n) {
      case 4: rows_times_panel<4, Steps>(w, r, panel, out); break;
      case 3: rows_times_panel<3, Steps>(w, r, panel, out); break;
      case 2: rows_times_panel<2, Steps>(w, r, panel, out); break;
      default: rows_times_panel<1, Steps>(w, r, panel, out); break;
    }
    for (int i = 0; i < n; ++i) {
      _mm512_store_ps(column[i], out[i]);
      const int64_t col = column0 + (out_rows ? out_rows[r + i] : r + i);
      for (int64_t t = 0; t < tokens; ++t) y[t * y_stride + col] = column[i][t];
    }
  }
}

}  // namespace

void unpack_rows(BlockType type, const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, UnpackedRows& out) {
  out.rows = rows;
  out.cols = cols;
  out.group = type == BlockType::Q6_K ? 16 : 32;
  out.codes.resize(static_cast<size_t>(rows * cols));
  out.scale.resize(static_cast<size_t>(rows * cols / out.group));
  out.bias.resize(static_cast<size_t>(rows * cols / out.group));
  switch (type) {
    case BlockType::Q4_0: return unpack_q32<Q4_0>(w, row_bytes, cols, rows, out);
    case BlockType::Q4_1: return unpack_q32<Q4_1>(w, row_bytes, cols, rows, out);
    case BlockType::Q5_0: return unpack_q32<Q5_0>(w, row_bytes, cols, rows, out);
    case BlockType::Q5_1: return unpack_q32<Q5_1>(w, row_bytes, cols, rows, out);
    case BlockType::Q8_0: return unpack_q32<Q8_0>(w, row_bytes, cols, rows, out);
    case BlockType::Q4_K: return unpack_q45_k<false>(w, row_bytes, cols, rows, out);
    case BlockType::Q5_K: return unpack_q45_k<true>(w, row_bytes, cols, rows, out);
    case BlockType::Q6_K: return unpack_q6_k(w, row_bytes, cols, rows, out);
    default: return;
  }
}

void panel_products(const UnpackedRows& w, int64_t r0, int64_t r1, const TokenPanel& panel, int64_t tokens, float* y,
                    int64_t y_stride, int64_t column0, const int32_t* out_rows) {
  if (w.group == 16) return products<4>(w, r0, r1, panel, tokens, y, y_stride, column0, out_rows);
  products<8>(w, r0, r1, panel, tokens, y, y_stride, column0, out_rows);
}

}  // namespace kvc
#else
namespace kvc {
void unpack_rows(BlockType, const uint8_t*, int64_t, int64_t, int64_t, UnpackedRows&) {}
void panel_products(const UnpackedRows&, int64_t, int64_t, const TokenPanel&, int64_t, float*, int64_t, int64_t,
                    const int32_t*) {}
}  // namespace kvc
#endif
