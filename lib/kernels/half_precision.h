#pragma once
// 16-bit weights (bf16, f16) read as fp32: the CPU kernels keep weights in their stored 16 bits, which
// halves the bytes a decode step streams, and widen them in registers, accumulating in fp32.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc {

bool is_half_type(at::ScalarType type);  // bf16 or f16

// dst[i] = float(src[i]) for i < n; `src` holds n values of `type` (bf16 or f16). Exact.
void half_to_float(at::ScalarType type, const void* src, float* dst, int64_t n);
// The reverse: n values of `type` rounded from fp32 as LibTorch's conversion rounds them (to nearest,
// ties to even), so that a row written here holds the bits that `.to(type)` gives.
void float_to_half(at::ScalarType type, const float* src, void* dst, int64_t n);

// y[r] = sum_i float(w[r][i]) * x[i] for r in [r0, r1), w holding rows of n values, each row summed in
// a fixed order (so thread count does not matter). The instruction set is chosen once per call, not
// per row: small models have short rows.
// Caps the instruction set the functions above use (default: the best the CPU has), so that tests cover
// the AVX2 and portable paths on a machine that has AVX-512.
enum class HalfPrecisionIsa { Best, Avx2, Portable };
void limit_half_precision_isa(HalfPrecisionIsa isa);

void half_matvec_rows(at::ScalarType type, const void* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n);

}  // namespace kvc
