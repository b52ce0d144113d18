#pragma once
// Multi-row products (prefill): y = x W^T (+ b), fp32 activations on CPU, split over LibTorch's (OpenMP) threads,
// each running a single-threaded BLAS GEMM on its share. The whole forward pass then uses one thread
// pool: OpenBLAS's own pthreads, spinning between calls, competed with OpenMP's threads for the
// same cores and forced a choice between fast prefill and fast decode.
#include <ATen/ATen.h>

namespace kvc {

// x [T, in] fp32, weight [out, in] fp32, bf16 or f16, bias [out] or undefined. Returns [T, out], or an
// undefined tensor when the path does not apply (not fp32 activations on CPU): the caller then uses at::linear.
at::Tensor parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace kvc
