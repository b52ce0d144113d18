#pragma once
// The block kernels of each instruction-set level, one per block format (block_formats.h): rows r0..r1
// of a matrix of blocks times one activation row, y[r] = the row's product with it. Internal to
// block_matvec.cpp and block_linear.cpp (and their tests through those).
#include <cstdint>

#include "kernels/block_formats.h"
#include "kernels/block_isa.h"
#include "kernels/quantized_activation.h"

namespace kvc {

// `w`: the first row of the matrix (rows of `row_bytes`, `cols` values each); `a`: the input quantized in
// the format's activation blocks (32 values for Q4_0..Q8_0, 256 for the K formats).
using BlockRowsKernel = void (*)(const uint8_t* w, int64_t row_bytes, int64_t cols, const Q8Row& a, float* y,
                                 int64_t r0, int64_t r1);
// The same from fp32 activations (x: cols values), the weights dequantized in registers.
using BlockRowsFloatKernel = void (*)(const uint8_t* w, int64_t row_bytes, int64_t cols, const float* x, float* y,
                                      int64_t r0, int64_t r1);

// Rows of any format dequantized to fp32 (out: rows * cols values), in plain C++: the prefill's panels on
// levels without the AVX-512 panel products.
void dequantize_block_rows(BlockType type, const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, float* out);

// nullptr when the level has no kernel for the type (F32/F16/BF16 go through the fp32 kernels).
BlockRowsKernel portable_block_kernel(BlockType type);
BlockRowsKernel avx2_block_kernel(BlockType type);
BlockRowsKernel avx512_block_kernel(BlockType type);
BlockRowsFloatKernel avx512_float_block_kernel(BlockType type);

inline BlockRowsKernel block_kernel(BlockIsa isa, BlockType type) {
  switch (isa) {
    case BlockIsa::Avx512Vnni: return avx512_block_kernel(type);
    case BlockIsa::Avx2: return avx2_block_kernel(type);
    default: return portable_block_kernel(type);
  }
}

// Which activation-block size the integer kernels of `type` take: 32, 256, or 0 (fp32 activations).
inline int64_t activation_block(BlockType type) { return is_q32_format(type) ? 32 : is_k_format(type) ? 256 : 0; }

}  // namespace kvc
