// PressObserver's decoding schedule (kvpress' DecodingPress and CompressionRatioDecodingPress): the cache
// grows while decoding and every `interval` passes each layer is scored whole and cut to its target.
#include <algorithm>
#include <cmath>

#include "press/cache_rescoring.h"
#include "press/cam_merge.h"
#include "press/press_observer.h"
#include "util/error.h"

namespace kvc {

void PressObserver::scheduled_decode_layer(const LayerStep& step, KVCache& cache) {
  const PressConfig::DecodingSchedule& schedule = config_->decoding;
  const int64_t l = step.layer, T = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  KVC_CHECK(positions_[li].defined(), "--press {}: layer {} keeps a different number of entries per head",
            config_->name, l);
  const at::Tensor positions = step.positions.to(at::kLong);
  positions_[li].append(positions);
  if (schedule.merge_window > 0) {
    // CaM's Σ attention each entry received from the decoded queries (the prompt's attention not counted).
    if (!decoding_started_[li]) {
      const int64_t before = positions_[li].length() - T;
      cumulative_[li].assign(at::zeros({shape_.attention.num_kv_heads, before}, at::kDouble));
      decoding_started_[li] = 1;
    }
    cumulative_[li].append_zeros(T);
    aggregate_heads_into(step.stats.column_sums, HeadAgg::Mean, cumulative_[li].view(), /*accumulate=*/true);
  }
  // The newest `window` queries (a copy: the step's tensors are the forward pass's buffers).
  at::Tensor& queries = decoded_queries_[li];
  at::Tensor& query_positions = decoded_positions_[li];
  queries = queries.defined() ? at::cat({queries, step.queries}, 1) : step.queries.clone();
  query_positions = query_positions.defined() ? at::cat({query_positions, positions}) : positions.clone();
  if (queries.size(1) > schedule.window) {
    const int64_t drop = queries.size(1) - schedule.window;
    queries = queries.narrow(1, drop, schedule.window).contiguous();
    query_positions = query_positions.narrow(0, drop, schedule.window).contiguous();
  }
  // The tokens seen so far: the newest position + 1 (the prompt's and every decoded one, kept or not).
  const int64_t seen = positions[T - 1].item<int64_t>() + 1;
  const int64_t target =
      schedule.fraction > 0
          ? std::max<int64_t>(1,
                              static_cast<int64_t>(std::floor(static_cast<double>(seen) * (1.0 - schedule.fraction))))
          : schedule.target;
  // As kvpress: every `interval` passes, or at once for a pass longer than the target.
  const int64_t passes = ++passes_since_compression_[li];
  if (passes < schedule.interval && T < target) return;
  passes_since_compression_[li] = 0;
  const at::Tensor scored_queries = queries, scored_positions = query_positions;
  queries = at::Tensor();
  query_positions = at::Tensor();
  if (positions_[li].length() <= target) return;
  bound_[li] = target;
  LayerCache& lc = layer_cache(cache, l);
  const LayerStep whole = cache_as_step(lc, shape_.attention, step, positions_[li].view(), scored_queries,
                                        scored_positions, config_->scorer->probe());
  const at::Tensor importance = config_->scorer->score(input(l, /*prefill=*/false, &whole));
  if (schedule.merge_window == 0) {
    compress(l, importance, target, cache);
    return;
  }
  // CaM: one selection for every head by the scores averaged over heads; the candidates merge first.
  const at::Tensor mean_scores = importance.to(at::kDouble).mean(0, /*keepdim=*/true);
  CamMergeInputs merge;
  merge.mean_scores = mean_scores[0];
  merge.kept = top_indices(mean_scores, target)[0];
  merge.attention = cumulative_[li].view();
  merge.positions = positions_[li].view();
  merge.candidates = passes;
  merge.window = schedule.merge_window;
  merge.seed = schedule.seed;
  merge.layer = l;
  cam_merge(merge, require_mergeable_rows(lc, "CaM's merge").merge_rows().values);
  compress(l, mean_scores.expand({shape_.attention.num_kv_heads, -1}), target, cache);
}

}  // namespace kvc
