#include "io/gguf_dequant.h"

#include <cstring>

#include "io/gguf_reader.h"
#include "util/error.h"

namespace kvc::gguf {
namespace {

enum : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

uint16_t read_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t read_u32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
float read_half(const uint8_t* p) { return half_to_float(read_u16(p)); }

// 32-value blocks: a half scale `d` (and a half minimum for the _1 formats), then 4 or 5-bit values.
void q4_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = read_half(b), m = read_half(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// The fifth bit of value j sits in bit j (low half) or bit j+16 (high half) of `qh`.
void q5_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  const uint32_t qh = read_u32(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int x0 = static_cast<int>((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10)) - 16;
    const int x1 = static_cast<int>((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10)) - 16;
    y[j] = static_cast<float>(x0) * d;
    y[j + 16] = static_cast<float>(x1) * d;
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = read_half(b), m = read_half(b + 2);
  const uint32_t qh = read_u32(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const uint32_t x0 = (qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10);
    const uint32_t x1 = (qs[j] >> 4) | ((qh >> (j + 12)) & 0x10);
    y[j] = static_cast<float>(x0) * d + m;
    y[j + 16] = static_cast<float>(x1) * d + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = read_half(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// K-quants: 256-value super-blocks of 8 sub-blocks whose 6-bit scales and minima are packed in 12 bytes.
void scale_min_k4(int j, const uint8_t* q, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *d = static_cast<uint8_t>((q[j + 4] & 0x0F) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

void q4_k(const uint8_t* b, float* y) {
  const float d = read_half(b), dmin = read_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* q = b + 16;
  int is = 0;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0x0F) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    q += 32;
    is += 2;
  }
}

void q5_k(const uint8_t* b, float* y) {
  const float d = read_half(b), dmin = read_half(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < 256; j += 64) {
    uint8_t sc, m;
    scale_min_k4(is, scales, &sc, &m);
    const float d1 = d * sc, m1 = dmin * m;
    scale_min_k4(is + 1, scales, &sc, &m);
    const float d2 = d * sc, m2 = dmin * m;
    for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0x0F) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

// Q6_K: low 4 bits in ql, high 2 bits in qh, 16 signed 8-bit scales, one half scale at the end.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const auto* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = read_half(b + 208);
  for (int n = 0; n < 256; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = static_cast<int>((ql[l] & 0x0F) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = static_cast<int>((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = static_cast<int>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = static_cast<int>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

using BlockDecoder = void (*)(const uint8_t*, float*);

BlockDecoder block_decoder(uint32_t type) {
  switch (type) {
    case kQ4_0: return q4_0;
    case kQ4_1: return q4_1;
    case kQ5_0: return q5_0;
    case kQ5_1: return q5_1;
    case kQ8_0: return q8_0;
    case kQ4_K: return q4_k;
    case kQ5_K: return q5_k;
    case kQ6_K: return q6_k;
    default: return nullptr;
  }
}

}  // namespace

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FFu, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal: normalise
    exp = 113;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = uint32_t{b} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

bool can_dequantize(uint32_t type) {
  return type == kF32 || type == kF16 || type == kBF16 || block_decoder(type) != nullptr;
}

void dequantize(uint32_t type, const uint8_t* blocks, uint64_t elements, float* out) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  KVC_CHECK(can_dequantize(type),
            "GGUF tensor type {} ({}) cannot be dequantized (supported: F32, F16, BF16, "
            "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K)",
            info ? info->name : "unknown", type);
  KVC_CHECK(elements % info->block_elements == 0,
            "GGUF tensor of type {}: {} values is not a whole number of "
            "{}-value blocks",
            info->name, elements, info->block_elements);
  if (type == kF32) {
    std::memcpy(out, blocks, elements * sizeof(float));
    return;
  }
  if (type == kF16 || type == kBF16) {
    for (uint64_t i = 0; i < elements; ++i) {
      const uint16_t v = read_u16(blocks + 2 * i);
      out[i] = type == kF16 ? half_to_float(v) : bf16_to_float(v);
    }
    return;
  }
  const BlockDecoder decode = block_decoder(type);
  const uint64_t n_blocks = elements / info->block_elements;
  for (uint64_t i = 0; i < n_blocks; ++i) decode(blocks + i * info->block_bytes, out + i * info->block_elements);
}

}  // namespace kvc::gguf
