#pragma once
// Masked grouped-query attention over a KV head's entries, in query blocks so the score matrix never
// exceeds a fixed size. Shared by the cache schemes that hold rotated keys densely.
#include <ATen/ATen.h>

#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/attention_shape.h"

namespace kvc {

// What every attention routine shares, whatever holds its keys and values (dense buffers, low-rank
// coefficients, entries read back from storage, gate training): which entries a query must not see,
// and how the statistics a probe asks for are gathered block by block.

// Entries a block of queries must not see: later positions, or outside the sliding window.
// q_positions [tb]; key_positions [n, S] (n: KV heads, or 1 when every head holds the same positions).
// Returns [n, 1, tb, S] bool, broadcasting over the query heads of a group.
at::Tensor attention_mask(const at::Tensor& q_positions, const at::Tensor& key_positions, int64_t sliding_window);

// Gathers what `probe` asks for from the probabilities of successive query blocks into `stats`.
class ProbeCollector {
 public:
  ProbeCollector(const AttentionProbe& probe, AttentionStats* stats, int64_t num_heads, int64_t num_queries,
                 int64_t num_entries, const at::TensorOptions& options);
  bool active() const { return active_; }
  // probs [n_kv, group, tb, S] of the queries t0..t0+tb-1.
  void add(const at::Tensor& probs, int64_t t0);

 private:
  AttentionProbe probe_;
  AttentionStats* stats_;
  bool active_;
  int64_t num_heads_, num_queries_, num_entries_, window_;
};

// queries [n_heads, T, d] (rotated); keys/values [n_kv, S, w] stored as `stored` says (Undefined: the
// tensors' own dtypes, w = d); key_positions [n_kv, S] int64; q_positions [T] int64. Query head h reads
// KV head h / (n_heads / n_kv). Returns [n_heads, T, d].
at::Tensor grouped_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             const at::Tensor& keys, const at::Tensor& values, const at::Tensor& key_positions,
                             const AttentionProbe& probe, AttentionStats* stats, CacheTypes stored = {});

}  // namespace kvc
