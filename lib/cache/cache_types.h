#pragma once
// The element types a cache stores its keys and values in, named as llama.cpp names them
// (--cache-type-k / --cache-type-v): f32, f16, bf16. Attention reads 16-bit entries directly (widened
// in registers by the CPU decode kernel), so a 16-bit cache holds and streams half the bytes.
#include <ATen/ATen.h>

#include <string>

namespace kvc {

struct CacheTypes {
  // Undefined: the activations' dtype (fp32 on CPU, the weights' dtype on CUDA).
  at::ScalarType keys = at::ScalarType::Undefined;
  at::ScalarType values = at::ScalarType::Undefined;

  // With Undefined resolved to `activations`.
  CacheTypes resolved(at::ScalarType activations) const;
};

// "f32" | "f16" | "bf16" | "auto" (Undefined). `flag` names the option in the error for anything else.
at::ScalarType parse_cache_type(const std::string& name, const std::string& flag);
std::string cache_type_name(at::ScalarType type);  // "f32", "f16", "bf16", "f64"

}  // namespace kvc
