#pragma once
// ggml's block formats decoded to float32, value for value as ggml's reference dequantizers decode
// them. Decoding works on whole blocks from a pointer, so a caller may decode a tensor at load or
// keep the blocks and decode rows as it needs them.
#include <cstdint>

namespace kvc::gguf {

// Whether dequantize() decodes this ggml type id.
bool can_dequantize(uint32_t type);
// Decodes `elements` values of ggml type `type` (a whole number of its blocks) from `blocks` into
// `out`. Throws naming the type when it is not one this build decodes.
void dequantize(uint32_t type, const uint8_t* blocks, uint64_t elements, float* out);
// IEEE half and bfloat16 to float (exact).
float half_to_float(uint16_t h);
float bf16_to_float(uint16_t b);

}  // namespace kvc::gguf
