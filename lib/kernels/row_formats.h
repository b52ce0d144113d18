#pragma once
// The formats a cache row of head_dim values may be stored in. Besides fp32/bf16/f16, ggml's block
// formats Q8_0 (34 bytes per 32 values: a half scale, 32 int8) and Q4_0 (18 bytes: a half scale, 32
// 4-bit values). They are tagged by PyTorch's quantized scalar types, the nearest it has (8-bit signed;
// 4-bit packed two per byte); their tensors are uint8 rows of blocks, never PyTorch quantized tensors.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc {

inline constexpr at::ScalarType kCacheQ8_0 = at::ScalarType::QInt8;
inline constexpr at::ScalarType kCacheQ4_0 = at::ScalarType::QUInt4x2;
inline constexpr int64_t kRowBlockValues = 32;

inline bool is_block_format(at::ScalarType type) { return type == kCacheQ8_0 || type == kCacheQ4_0; }
inline int64_t row_block_bytes(at::ScalarType type) { return type == kCacheQ8_0 ? 34 : 18; }

// Elements of the stored tensor's last dimension for a row of `d` values (bytes for block formats).
inline int64_t stored_row_width(at::ScalarType type, int64_t d) {
  return is_block_format(type) ? d / kRowBlockValues * row_block_bytes(type) : d;
}
// Bytes one row of `d` values takes.
inline int64_t stored_row_bytes(at::ScalarType type, int64_t d) {
  return is_block_format(type) ? stored_row_width(type, d) : d * static_cast<int64_t>(at::elementSize(type));
}
// The dtype of the tensor holding rows of `type`.
inline at::ScalarType storage_dtype(at::ScalarType type) { return is_block_format(type) ? at::kByte : type; }

}  // namespace kvc
