#pragma once
// Grouped-query attention over entries held densely (the dense, per-head and retrieval layouts): the
// fast CPU kernels where they apply, else the shared blocked routine.
#include <ATen/ATen.h>

#include "cache/blocked_attention.h"
#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/attention_shape.h"

namespace kvc {

// queries [n_heads, T, d] (rotated); keys/values [n_kv, S, w] stored as `stored` says (Undefined: the
// tensors' own dtypes, w = d); key_positions [n_kv, S] int64; q_positions [T] int64. Query head h reads
// KV head h / (n_heads / n_kv). Returns [n_heads, T, d].
at::Tensor grouped_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             const at::Tensor& keys, const at::Tensor& values, const at::Tensor& key_positions,
                             const AttentionProbe& probe, AttentionStats* stats, CacheTypes stored = {});

}  // namespace kvc
