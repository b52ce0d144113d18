#pragma once
// Matrix products straight from a matrix of ggml blocks (block_matrix.h), for prefill: y = x W^T.
// On AVX-512 VNNI the input's tokens are quantized to int8 once and multiplied 16 at a time with weight
// rows unpacked once per call (block_panels.h), split over LibTorch's threads by rows. Other levels
// dequantize panels of rows to fp32 and multiply them as the fp32 path does; inputs of a few tokens
// run the matrix-vector kernels of block_matvec.h token by token.
#include <ATen/ATen.h>

#include "kernels/block_matrix.h"

namespace kvc {

// x [T, cols] fp32 on the CPU, bias [rows] or undefined. Returns y [T, rows] fp32 (rows in output order).
// Each value's sum is in a fixed order, so the result does not depend on the thread count.
at::Tensor block_linear(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias = {});

}  // namespace kvc
