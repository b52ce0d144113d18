#pragma once
// Masked grouped-query attention over a KV head's entries, in query blocks so the score matrix never
// exceeds a fixed size. Shared by the cache schemes that hold rotated keys densely.
#include <ATen/ATen.h>

#include "core/attention_shape.h"
#include "cache/layer_cache.h"

namespace kvc {

// queries [n_heads, T, d] (rotated); keys/values [n_kv, S, d]; key_positions [n_kv, S] int64;
// q_positions [T] int64. Query head h reads KV head h / (n_heads / n_kv). Returns [n_heads, T, d].
at::Tensor grouped_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             const at::Tensor& keys, const at::Tensor& values, const at::Tensor& key_positions,
                             const AttentionProbe& probe, AttentionStats* stats);

}  // namespace kvc
