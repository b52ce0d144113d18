#pragma once
// Matrix-vector product for decoding (one token): y = W x (+ b), fp32 activations on CPU, streaming W once with
// AVX2/FMA over all LibTorch threads. Decode is bound by exactly this stream, and BLAS sgemv streams
// it well below the memory bandwidth.
#include <ATen/ATen.h>

#include <functional>

namespace kvc {

// weight [rows, cols] contiguous fp32, bf16 or f16 (widened in registers), x [cols] fp32, bias [rows] or undefined.
// Returns [rows], or an undefined tensor when the fast path does not apply (other dtype/device, no AVX2): the caller
// then uses at::mv. Each row is summed in a fixed order, so results do not depend on thread count.
// `alongside`, when given and the fast path applies, runs once on the calling thread while the other
// threads start on the product (balanced_parallel_for); when the fast path declines, it does not run.
at::Tensor fast_matvec(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias,
                       const std::function<void()>& alongside = {});

// Y [B, rows] for inputs X [B, cols] (fp32, contiguous rows): row b is what fast_matvec(weight, X[b], bias)
// returns, bit for bit (the same row kernel, the same order of sums). Each chunk of weight rows is multiplied
// with every input while it is in cache, so the weights stream from memory once for all B inputs: decoding B
// sequences in lockstep. Undefined where fast_matvec would decline; `alongside` as there.
at::Tensor fast_matvec_each(const at::Tensor& weight, const at::Tensor& x, const at::Tensor& bias,
                            const std::function<void()>& alongside = {});

// y[r] = w[r] . x for r in [r0, r1), w rows of n fp32 values (AVX2 when the CPU has it).
void fp32_matvec_rows(const float* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n);

}  // namespace kvc
