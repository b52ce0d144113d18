#pragma once
// The formats a cache stores its keys and values in, named as llama.cpp names them
// (--cache-type-k / --cache-type-v): f32, f16, bf16, and ggml's block formats q8_0 and q4_0 (one half
// scale per 32 values; kernels/row_formats.h). The decode kernel reads every format as stored,
// widening in registers, so a smaller cache also streams fewer bytes per step.
#include <ATen/ATen.h>

#include <string>

#include "kernels/row_formats.h"

namespace kvc {

struct CacheTypes {
  // Undefined: the activations' dtype (fp32 on CPU, the weights' dtype on CUDA).
  at::ScalarType keys = at::ScalarType::Undefined;
  at::ScalarType values = at::ScalarType::Undefined;

  // With Undefined resolved to `activations`.
  CacheTypes resolved(at::ScalarType activations) const;
  bool any_block_format() const { return is_block_format(keys) || is_block_format(values); }
  bool operator==(const CacheTypes& o) const { return keys == o.keys && values == o.values; }
};

// "f32" | "f16" | "bf16" | "q8_0" | "q4_0" | "auto" (Undefined). `flag` names the option in the error
// for anything else.
at::ScalarType parse_cache_type(const std::string& name, const std::string& flag);
std::string cache_type_name(at::ScalarType type);  // "f32", "f16", "bf16", "q8_0", "q4_0", "f64"
// One-line kvc::Error unless a model with `head_dim` on `device` can keep `types` (resolved): block
// formats hold rows of 32-value blocks, encoded on the CPU.
void check_cache_types_fit(CacheTypes types, int64_t head_dim, const at::Device& device);

// Rows [..., d] of a floating type as stored in `type`: the same tensor converted for fp32/bf16/f16,
// uint8 [..., stored_row_width] blocks for q8_0/q4_0 (encoded on the CPU as ggml encodes them; d a
// multiple of 32, values finite). Rows already stored as uint8 blocks pass through.
at::Tensor encode_rows(const at::Tensor& rows, at::ScalarType type);
// Stored rows back to `out` [..., d]: the values the decode kernel reads.
at::Tensor decode_rows(const at::Tensor& stored, at::ScalarType type, int64_t d, at::ScalarType out);

}  // namespace kvc
