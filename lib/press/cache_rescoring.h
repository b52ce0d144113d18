#pragma once
// A layer's whole cache as a scorer's step, for a press that scores the cache again while decoding
// (press/decoding.cpp): every cached entry stands where a prompt's tokens stand at prefill, and the
// attention statistics are those of the last decoded queries over every entry.
#include <ATen/ATen.h>

#include "cache/layer_cache.h"
#include "core/attention_shape.h"
#include "model/forward_observer.h"

namespace kvc {

// The step of `cache` (a layout with readable rows): keys before RoPE and values of every entry
// [n_kv, S, d] in storage order, positions [n_kv, S] (`entry_positions`, each head its own), `queries`
// [n_heads, W, d] (rotated) at `query_positions` [W] with the statistics `probe` asks for over every
// entry (a query sees the entries at or before its position), and the RoPE and output projection of
// `current` (the decode step of the same layer).
LayerStep cache_as_step(LayerCache& cache, const AttentionShape& shape, const LayerStep& current,
                        const at::Tensor& entry_positions, const at::Tensor& queries, const at::Tensor& query_positions,
                        const AttentionProbe& probe);

}  // namespace kvc
