#pragma once
// The hand-written CPU kernels write through raw pointers, which autograd cannot follow: an output
// they produce has no gradient function, so gradients stop there. While gradients are being recorded
// for one of their inputs (gate training), they step aside and LibTorch's differentiable ops run.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <initializer_list>

namespace kvc {

inline bool records_gradient(std::initializer_list<at::Tensor> inputs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

}  // namespace kvc
