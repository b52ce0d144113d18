#pragma once
// 16-bit weights (bf16, f16) read as fp32: the CPU kernels keep weights in their stored 16 bits, which
// halves the bytes a decode step streams, and widen them in registers, accumulating in fp32.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc {

bool is_half_type(at::ScalarType type);  // bf16 or f16

// dst[i] = float(src[i]) for i < n; `src` holds n values of `type` (bf16 or f16). Exact.
void half_to_float(at::ScalarType type, const void* src, float* dst, int64_t n);

// sum_i float(w[i]) * x[i], in the fixed order of the fp32 kernel (so thread count does not matter).
float half_dot(at::ScalarType type, const void* w, const float* x, int64_t n);

}  // namespace kvc
