#pragma once
// The gated MLP's activation in one pass: act(gate) * up, act SiLU or tanh-approximated GELU, over the
// [T, 2 * inter] output of the stacked gate/up product. A decode step otherwise spends two LibTorch
// calls, their allocations and a view per layer on a few thousand values.
#include <ATen/ATen.h>

namespace kvc {

// gate_up [T, 2 * inter] fp32 on the CPU, gate first. Returns [T, inter], or an undefined tensor where
// the kernel does not apply (device, dtype, gradients, no AVX2): the caller then uses LibTorch.
at::Tensor fast_gated_activation(const at::Tensor& gate_up, int64_t inter, bool gelu_tanh);

}  // namespace kvc
