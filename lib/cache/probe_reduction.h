#pragma once
// Statistics a probe asks for that are reductions of every query's probability rows (group_square_sums,
// column_max):
// the layer is attended with every row asked for, the reduction taken, and the rows trimmed back to the
// probe's own window, so a pass keeps O(entries) per layer instead of O(queries x entries).
#include <ATen/ATen.h>

#include "cache/layer_cache.h"

namespace kvc {

// The probe to attend with: `asked`, with every query's row when a reduction needs them.
AttentionProbe probe_with_reductions(const AttentionProbe& asked);

// Σ over the rows of window probabilities [n_heads, T, S] of the square of each row averaged over the
// query heads of a KV head: [n_kv, S] float64.
at::Tensor group_square_sums(const at::Tensor& window_probs, int64_t num_kv_heads);

// After attending with probe_with_reductions(asked): fills the reductions `asked` wants from `stats`'
// every-query rows, then keeps only the last asked.window rows (a copy, so the full rows are freed).
void reduce_probe_statistics(const AttentionProbe& asked, int64_t num_kv_heads, AttentionStats& stats);

}  // namespace kvc
