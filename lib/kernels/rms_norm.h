#pragma once
// RMSNorm of fp32 rows on CPU in one pass per row (Hugging Face's formula: x * rsqrt(mean(x^2) + eps),
// then the weight): the per-token hot path otherwise runs seven tensor ops.
#include <ATen/ATen.h>

namespace kvc {

// x [T, h] fp32 on CPU, weight [h] fp32. Returns [T, h], or an undefined tensor when the fast path
// does not apply.
at::Tensor fast_rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace kvc
