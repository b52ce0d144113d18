#include "io/gguf_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "util/error.h"

namespace kvc::gguf {
namespace {

constexpr int kBlock = 32;

void store_half(uint8_t* p, float v) {
  const uint16_t h = float_to_half(v);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// Scale amax / 127 (kept exactly in float for the division, stored in half); values rounded half away
// from zero.
void q8_0_block(const float* x, uint8_t* b) {
  float amax = 0.0f;
  for (int j = 0; j < kBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(b, d);
  for (int j = 0; j < kBlock; ++j) {
    // |x * id| <= 127 for finite blocks; the clamp keeps a non-finite value from an undefined conversion.
    const float q = std::round(x[j] * id);
    b[2 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::isnan(q) ? 0.0f : std::clamp(q, -127.0f, 127.0f)));
  }
}

// Scale max / -8, `max` the value of largest magnitude with its sign, so that value maps to -8
// exactly; value j in the low nibble of byte j, value j + 16 in its high nibble, offset by 8.
void q4_0_block(const float* x, uint8_t* b) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < kBlock; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_half(b, d);
  const auto nibble = [id](float v) {
    const float shifted = v * id + 8.5f;  // in [0.5, 16.5] for finite blocks
    const float safe = std::isnan(shifted) ? 8.0f : std::clamp(shifted, 0.0f, 15.0f);
    return static_cast<uint8_t>(std::min(15, static_cast<int>(static_cast<int8_t>(safe))));
  };
  for (int j = 0; j < kBlock / 2; ++j) {
    b[2 + j] = static_cast<uint8_t>(nibble(x[j]) | (nibble(x[j + kBlock / 2]) << 4));
  }
}

}  // namespace

uint16_t float_to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const auto sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return static_cast<uint16_t>(sign | 0x7C00u | (a > 0x7F800000u ? 0x200u : 0u));
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65536: past the largest half
  if (a < 0x38800000u) {
    // Below 2^-14: a subnormal half, counted in units of 2^-24.
    const int exponent = static_cast<int>(a >> 23);
    if (exponent < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t mantissa = (a & 0x7FFFFFu) | 0x800000u;
    const int shift = 126 - exponent;
    uint32_t q = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  // Normal: rebias the exponent, keep 10 mantissa bits, round to nearest even (a carry may reach the
  // next exponent, or infinity, which is the right result).
  uint32_t h = (a - 0x38000000u) >> 13;
  const uint32_t rest = a & 0x1FFFu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

bool can_quantize(uint32_t type) { return type == kTypeQ8_0 || type == kTypeQ4_0; }

uint64_t quantized_bytes(uint32_t type, uint64_t elements) {
  KVC_CHECK(can_quantize(type), "ggml type {} cannot be quantized (supported: Q8_0, Q4_0)", type);
  KVC_CHECK(elements % kBlock == 0, "{} values are not a whole number of 32-value blocks", elements);
  return elements / kBlock * (type == kTypeQ8_0 ? 34 : 18);
}

void quantize(uint32_t type, const float* x, uint64_t elements, uint8_t* out) {
  const uint64_t blocks = quantized_bytes(type, elements) / (type == kTypeQ8_0 ? 34 : 18);
  const auto encode = type == kTypeQ8_0 ? q8_0_block : q4_0_block;
  const uint64_t stride = type == kTypeQ8_0 ? 34 : 18;
  for (uint64_t i = 0; i < blocks; ++i) encode(x + i * kBlock, out + i * stride);
}

}  // namespace kvc::gguf
