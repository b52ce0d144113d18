#pragma once
// KL divergence and top-1 agreement of a (compressed) run against the exact model. Each window's
// first `context_fraction` is prefilled (where compression acts), the rest is fed `chunk` tokens at a
// time (decoding), and the next-token distributions over that rest are compared. Both runs follow
// the same schedule, so an uncompressed run gives KL exactly 0 and agreement exactly 1.
#include <vector>

#include "model/cache_setup.h"
#include "eval/perplexity.h"

namespace kvc {

struct KlOptions {
  WindowPlan plan;
  double context_fraction = 0.5;
  int64_t chunk = 1;
};

struct KlResult {
  double mean_kl = 0;
  double max_kl = 0;
  double top1_agreement = 0;
  int64_t tokens_scored = 0;
  int64_t windows = 0;
  double ppl_reference = 0;
  double ppl_compressed = 0;
  int64_t reference_kv_bytes = 0;   // Σ over windows of payload bytes after prefill
  int64_t compressed_kv_bytes = 0;
  // Of those, what sliding-window layers hold (CacheFootprint::window_payload_bytes): compression leaves them.
  int64_t reference_window_kv_bytes = 0;
  int64_t compressed_window_kv_bytes = 0;
  double compression_ratio() const {
    return reference_kv_bytes > 0 ? 1.0 - static_cast<double>(compressed_kv_bytes) / reference_kv_bytes : 0.0;
  }
  double seconds = 0;
};

// Next-token log-probabilities in float64, the precision every KL divergence here is computed in.
at::Tensor log_probabilities(const at::Tensor& logits);
// KL(p || q) over the last dimension, from log-probabilities (log_probabilities): one value per row.
at::Tensor kl_divergence(const at::Tensor& log_p, const at::Tensor& log_q);

KlResult evaluate_kl(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                     const CacheSetup& compressed, bool show_progress = true);

}  // namespace kvc
