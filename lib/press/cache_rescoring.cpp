#include "press/cache_rescoring.h"

#include "cache/attention.h"
#include "cache/probe_reduction.h"
#include "core/rope.h"
#include "util/error.h"

namespace kvc {

LayerStep cache_as_step(LayerCache& cache, const AttentionShape& shape, const LayerStep& current,
                        const at::Tensor& entry_positions, const at::Tensor& queries, const at::Tensor& query_positions,
                        const AttentionProbe& probe) {
  MergeableRows& rows = require_mergeable_rows(cache, "scoring the cache again while decoding");
  const MergeableRows::Rows held = rows.merge_rows();
  KVC_CHECK(current.rope != nullptr, "layer {}: no RoPE to recover the cached keys before rotation", current.layer);
  const int64_t S = entry_positions.size(1);
  const at::Tensor positions = entry_positions.to(held.keys.device(), at::kLong).contiguous();
  // The scorers work in the queries' precision (float32, or float64 in the reference runs).
  const at::Tensor rotated = held.keys.narrow(1, 0, S).to(queries.scalar_type()).contiguous();
  const at::Tensor values = held.values.narrow(1, 0, S).to(queries.scalar_type()).contiguous();
  LayerStep step;
  step.layer = current.layer;
  step.keys = current.rope->unapply(rotated, positions);
  step.values = values;
  step.queries = queries;
  step.positions = positions;
  step.rope = current.rope;
  step.output_projection = current.output_projection;
  if (probe.any()) {
    AttentionProbe asked = probe_with_reductions(probe);
    asked.window = std::min<int64_t>(asked.window, queries.size(1));
    grouped_attention(shape, queries, query_positions.to(at::kLong), rotated, values, positions, asked, &step.stats);
    reduce_probe_statistics(probe, shape.num_kv_heads, step.stats);
  }
  return step;
}

}  // namespace kvc
