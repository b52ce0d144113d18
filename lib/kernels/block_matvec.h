#pragma once
// Matrix-vector products straight from a matrix of ggml blocks (block_matrix.h), for decoding: the
// input is quantized once to int8 blocks and every row's blocks are multiplied with it by integer dot
// products (or, where kvc-bench --block-kernels measured it faster, dequantized in registers and
// multiplied with the fp32 input), over all LibTorch threads as fast_matvec (matvec.h) splits them.
#include <ATen/ATen.h>

#include <functional>

#include "kernels/block_matrix.h"

namespace kvc {

// x [cols] fp32 on the CPU, bias [rows] or undefined. Returns y [rows] fp32, rows in output order. Each
// row's sum is in a fixed order, so the result does not depend on the thread count. `alongside`, when
// given, runs once on the calling thread while the other threads start on the product.
at::Tensor block_matvec(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias = {},
                        const std::function<void()>& alongside = {});

// Y [B, rows] for inputs X [B, cols]: row b is what block_matvec(w, X[b], bias) returns, bit for bit. Each
// chunk of rows is multiplied with every input while it is in cache, so the blocks stream from memory once
// for all B inputs (decoding B sequences in lockstep).
at::Tensor block_matvec_each(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias = {},
                             const std::function<void()>& alongside = {});

// Which form of kernel a block format's products take on AVX-512 (other levels: Integer only).
enum class BlockKernelForm { Integer, Float };
BlockKernelForm block_kernel_form(BlockType type);
void set_block_kernel_form(BlockType type, BlockKernelForm form);  // benchmarks; not while a product runs

}  // namespace kvc
