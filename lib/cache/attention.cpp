#include "cache/attention.h"

#include <torch/version.h>

#include "kernels/decode_attention.h"
#include "kernels/prefill_attention.h"

namespace kvc {

at::Tensor grouped_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             const at::Tensor& keys, const at::Tensor& values, const at::Tensor& key_positions,
                             const AttentionProbe& probe, AttentionStats* stats, CacheTypes stored) {
  const int64_t H = shape.num_heads, d = shape.head_dim;
  const int64_t T = queries.size(1), S = keys.size(1);
  if (stored.keys == at::ScalarType::Undefined) stored.keys = keys.scalar_type();
  if (stored.values == at::ScalarType::Undefined) stored.values = values.scalar_type();
  if (T == 1 && q_positions.device().is_cpu()) {
    // One query: its attention row is all a method can ask for (column sums = the last window).
    const bool want = stats != nullptr && probe.any();
    at::Tensor probs;
    const at::Tensor fast =
        fast_decode_attention(queries, q_positions.item<int64_t>(), keys, values, key_positions, shape.sliding_window,
                              want ? &probs : nullptr, stored.keys, stored.values);
    if (fast.defined()) {
      if (want && probe.column_sums) stats->column_sums = probs;
      if (want && probe.window > 0) stats->window_probs = probs.view({H, 1, S});
      return fast;
    }
  }
  // Rows of blocks: only the decode kernel above reads them as stored; every other path (prefill, a
  // CPU without AVX2) attends over their decoded values.
  if (stored.any_block_format()) {
    return grouped_attention(shape, queries, q_positions, decode_rows(keys, stored.keys, d, queries.scalar_type()),
                             decode_rows(values, stored.values, d, queries.scalar_type()), key_positions, probe, stats);
  }
  // A cache typed below the activations' precision: the decode kernel above reads it as stored; every
  // other path (prefill, GPU, LibTorch) works on a widened copy of the entries.
  if (keys.scalar_type() != queries.scalar_type() || values.scalar_type() != queries.scalar_type()) {
    return grouped_attention(shape, queries, q_positions, keys.to(queries.scalar_type()),
                             values.to(queries.scalar_type()), key_positions, probe, stats);
  }
  if (T > 1) {
    // The statistics a probe asks for come out of the same fused pass.
    const bool want = stats != nullptr && probe.any();
    PrefillStatistics prefill_stats{probe.column_sums, probe.window};
    const at::Tensor fast = fast_prefill_attention(queries, q_positions, keys, values, key_positions,
                                                   shape.sliding_window, want ? &prefill_stats : nullptr);
    if (fast.defined()) {
      if (want) {
        stats->column_sums = prefill_stats.column_sums;
        stats->window_probs = prefill_stats.window_probs;
      }
      return fast;
    }
  }
#if TORCH_VERSION_MAJOR >= 2
  // A GPU prefill into an empty layer (it holds exactly these T tokens, in order): PyTorch's fused causal
  // attention, instead of query blocks that each read their visible length back from the GPU.
  if (T > 1 && T == S && !keys.device().is_cpu() && shape.sliding_window == 0 && !(stats != nullptr && probe.any())) {
    const int64_t G = shape.group_size();
    const at::Tensor k = G > 1 ? keys.repeat_interleave(G, 0) : keys;
    const at::Tensor v = G > 1 ? values.repeat_interleave(G, 0) : values;
    return at::scaled_dot_product_attention(queries.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), {}, 0.0,
                                            /*is_causal=*/true)
        .squeeze(0);
  }
#endif
  DenseEntries entries(keys, values, key_positions.to(keys.device()));
  return blocked_attention(shape, queries, q_positions, entries, probe, stats);
}

}  // namespace kvc
