// The block kernels in plain C++: each block's values decoded one by one (as gguf_dequant.cpp decodes
// them), their integer products with the quantized activations summed exactly, then scaled. The
// reference the vector levels are tested against, and the path of a CPU without AVX2.
#include <c10/util/Half.h>

#include <cstring>

#include "kernels/block_dot.h"

namespace kvc {
namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, sizeof h);
  return c10::detail::fp16_ieee_to_fp32_value(h);
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The 32-value formats: value j of a block is code(block, j), an integer; `Offset` is subtracted from it
// (the _0 formats), the _1 formats add their half minimum m instead.
struct Q4_0 {
  static constexpr int64_t kBytes = 18;
  static int code(const uint8_t* b, int j) { return j < 16 ? (b[2 + j] & 15) - 8 : (b[2 + j - 16] >> 4) - 8; }
  static constexpr bool kMin = false;
};
struct Q4_1 {
  static constexpr int64_t kBytes = 20;
  static int code(const uint8_t* b, int j) { return j < 16 ? b[4 + j] & 15 : b[4 + j - 16] >> 4; }
  static constexpr bool kMin = true;
};
struct Q5_0 {
  static constexpr int64_t kBytes = 22;
  static int code(const uint8_t* b, int j) {
    const int high = static_cast<int>((u32_at(b + 2) >> j) & 1) << 4;
    return (j < 16 ? b[6 + j] & 15 : b[6 + j - 16] >> 4) + high - 16;
  }
  static constexpr bool kMin = false;
};
struct Q5_1 {
  static constexpr int64_t kBytes = 24;
  static int code(const uint8_t* b, int j) {
    const int high = static_cast<int>((u32_at(b + 4) >> j) & 1) << 4;
    return (j < 16 ? b[8 + j] & 15 : b[8 + j - 16] >> 4) + high;
  }
  static constexpr bool kMin = true;
};
struct Q8_0 {
  static constexpr int64_t kBytes = 34;
  static int code(const uint8_t* b, int j) { return static_cast<int8_t>(b[2 + j]); }
  static constexpr bool kMin = false;
};

template <class F>
float dot_q32(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    const int8_t* q = a.q + i * 32;
    int32_t dot = 0;
    for (int j = 0; j < 32; ++j) dot += F::code(b, j) * q[j];
    sum += half_at(b) * a.d[i] * static_cast<float>(dot);
    if constexpr (F::kMin) sum += half_at(b + 2) * a.dsum[i];
  }
  return sum;
}

// K formats: the 6-bit scale and minimum of sub-block j (of 8) from the 12 packed bytes.
void scale_and_min(const uint8_t* packed, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = packed[j] & 63;
    *min = packed[j + 4] & 63;
  } else {
    *scale = (packed[j + 4] & 15) | ((packed[j - 4] >> 6) << 4);
    *min = (packed[j + 4] >> 4) | ((packed[j] >> 6) << 4);
  }
}

// Q4_K and Q5_K: sub-block j's values are nibble j % 2 of the 32 bytes of group j / 2, plus for Q5_K
// bit j of each of the 32 high-bit bytes as a fifth bit.
template <bool FiveBits>
float dot_q45_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  float sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    const uint8_t* high = b + 16;
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    const int8_t* q = a.q + i * 256;
    int32_t scaled = 0, mins = 0;
    for (int j = 0; j < 8; ++j) {
      int scale, min;
      scale_and_min(b + 4, j, &scale, &min);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        int v = (low[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
        if (FiveBits) v += ((high[l] >> j) & 1) << 4;
        dot += v * q[32 * j + l];
      }
      scaled += scale * dot;
      mins += min * a.sum32[i * 8 + j];
    }
    sum += half_at(b) * a.d[i] * static_cast<float>(scaled) - half_at(b + 2) * a.d[i] * static_cast<float>(mins);
  }
  return sum;
}

// Q6_K: value n = 128 h + 32 k + l takes 4 bits from byte 64 h + 32 (k % 2) + l of the low bits (nibble
// k / 2), 2 bits from bits 2k of byte 32 h + l of the high bits, minus 32; its scale is number n / 16.
float dot_q6_k(const uint8_t* row, int64_t blocks, const Q8Row& a) {
  float sum = 0.0f;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 210;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const int8_t* q = a.q + i * 256;
    int32_t scaled = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int n = 16 * g; n < 16 * g + 16; ++n) {
        const int h = n / 128, k = (n % 128) / 32, l = n % 32;
        const int lo = (b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
        const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
        dot += ((lo | (hi << 4)) - 32) * q[n];
      }
      scaled += scales[g] * dot;
    }
    sum += half_at(b + 208) * a.d[i] * static_cast<float>(scaled);
  }
  return sum;
}

// Dequantization from the same codes: value = d code (+ m for the _1 formats).
template <class F>
void decode_q32(const uint8_t* row, int64_t blocks, float* out) {
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * F::kBytes;
    const float d = half_at(b), m = F::kMin ? half_at(b + 2) : 0.0f;
    for (int j = 0; j < 32; ++j) out[32 * i + j] = d * static_cast<float>(F::code(b, j)) + m;
  }
}

template <bool FiveBits>
void decode_q45_k(const uint8_t* row, int64_t blocks, float* out) {
  constexpr int64_t kBytes = FiveBits ? 176 : 144;
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * kBytes;
    const uint8_t* low = b + (FiveBits ? 48 : 16);
    const float d = half_at(b), dmin = half_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      int scale, min;
      scale_and_min(b + 4, j, &scale, &min);
      for (int l = 0; l < 32; ++l) {
        int v = (low[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
        if (FiveBits) v += ((b[16 + l] >> j) & 1) << 4;
        out[256 * i + 32 * j + l] =
            d * static_cast<float>(scale) * static_cast<float>(v) - dmin * static_cast<float>(min);
      }
    }
  }
}

void decode_q6_k(const uint8_t* row, int64_t blocks, float* out) {
  for (int64_t i = 0; i < blocks; ++i) {
    const uint8_t* b = row + i * 210;
    const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
    const float d = half_at(b + 208);
    for (int n = 0; n < 256; ++n) {
      const int h = n / 128, k = (n % 128) / 32, l = n % 32;
      const int lo = (b[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2))) & 15;
      const int hi = (b[128 + 32 * h + l] >> (2 * k)) & 3;
      out[256 * i + n] = d * static_cast<float>(scales[n / 16]) * static_cast<float>((lo | (hi << 4)) - 32);
    }
  }
}

template <float (*Dot)(const uint8_t*, int64_t, const Q8Row&), int64_t BlockValues>
void rows(const uint8_t* w, int64_t row_bytes, int64_t cols, const Q8Row& a, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) y[r] = Dot(w + r * row_bytes, cols / BlockValues, a);
}

}  // namespace

void dequantize_block_rows(BlockType type, const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows,
                           float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = w + r * row_bytes;
    float* o = out + r * cols;
    switch (type) {
      case BlockType::Q4_0: decode_q32<Q4_0>(row, cols / 32, o); break;
      case BlockType::Q4_1: decode_q32<Q4_1>(row, cols / 32, o); break;
      case BlockType::Q5_0: decode_q32<Q5_0>(row, cols / 32, o); break;
      case BlockType::Q5_1: decode_q32<Q5_1>(row, cols / 32, o); break;
      case BlockType::Q8_0: decode_q32<Q8_0>(row, cols / 32, o); break;
      case BlockType::Q4_K: decode_q45_k<false>(row, cols / 256, o); break;
      case BlockType::Q5_K: decode_q45_k<true>(row, cols / 256, o); break;
      case BlockType::Q6_K: decode_q6_k(row, cols / 256, o); break;
      case BlockType::F32: std::memcpy(o, row, static_cast<size_t>(cols) * 4); break;
      case BlockType::F16:
        for (int64_t j = 0; j < cols; ++j) o[j] = half_at(row + 2 * j);
        break;
      case BlockType::BF16:
        for (int64_t j = 0; j < cols; ++j) {
          const uint32_t bits = static_cast<uint32_t>(row[2 * j] | (row[2 * j + 1] << 8)) << 16;
          std::memcpy(&o[j], &bits, 4);
        }
        break;
    }
  }
}

BlockRowsKernel portable_block_kernel(BlockType type) {
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
