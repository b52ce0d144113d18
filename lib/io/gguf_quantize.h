#pragma once
// ggml's Q8_0 and Q4_0 blocks encoded from float32 as ggml's reference quantizers encode them, byte
// for byte: what a cache stores when its rows are kept in those formats (--cache-type-k q8_0).
// dequantize() in gguf_dequant.h reads them back.
#include <cstdint>

namespace kvc::gguf {

inline constexpr uint32_t kTypeQ4_0 = 2;
inline constexpr uint32_t kTypeQ8_0 = 8;

// Whether quantize() encodes this ggml type id (Q8_0, Q4_0).
bool can_quantize(uint32_t type);
// Bytes of `elements` values of ggml type `type` (a whole number of its 32-value blocks).
uint64_t quantized_bytes(uint32_t type, uint64_t elements);
// Encodes `elements` values (a whole number of 32-value blocks) from `x` into `out`. Non-finite values
// give defined (meaningless) blocks.
void quantize(uint32_t type, const float* x, uint64_t elements, uint8_t* out);
// IEEE float to half, rounding to nearest even (overflow to infinity), as ggml stores block scales.
uint16_t float_to_half(float f);

}  // namespace kvc::gguf
