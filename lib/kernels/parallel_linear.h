#pragma once
// Multi-row products (prefill): y = x W^T (+ b), fp32 activations on CPU, split over LibTorch's (OpenMP) threads,
// each running a single-threaded BLAS GEMM on its share. The whole forward pass then uses one thread
// pool: OpenBLAS's own pthreads, spinning between calls, competed with OpenMP's threads for the
// same cores and forced a choice between fast prefill and fast decode.
#include <ATen/ATen.h>

#include <functional>

namespace kvc {

// x [T, in] fp32, weight [out, in] fp32, bf16 or f16, bias [out] or undefined. Returns [T, out], or an
// undefined tensor when the path does not apply (not fp32 activations on CPU): the caller then uses at::linear.
at::Tensor parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

// Rows first .. first + count of a weight, as fp32, into out [count, cols] (16-bit rows widened, rows of
// blocks dequantized).
using WidenRows = std::function<void(int64_t first, int64_t count, float* out)>;
// y [T, rows] = x [T, cols] W^T for a weight read through `widen`, over `threads` threads (many input
// rows): W in blocks of rows (6 MB as fp32) widened once into buffers shared by every thread, each thread
// multiplying its share of x's rows by a block while widening its share of the next one.
void widened_linear_split_rows(const at::Tensor& x, int64_t rows, int64_t cols, const WidenRows& widen, at::Tensor& y,
                               int64_t threads);

}  // namespace kvc
