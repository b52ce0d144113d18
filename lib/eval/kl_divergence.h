#pragma once
// KL divergence and top-1 agreement of a (compressed) run against the exact model. Each window's
// first `context_fraction` is prefilled (where compression acts), the rest is fed `chunk` tokens at a
// time (decoding), and the next-token distributions over that rest are compared. Both runs follow
// the same schedule, so an uncompressed run gives KL exactly 0 and agreement exactly 1.
#include <functional>
#include <vector>

#include "eval/perplexity.h"
#include "model/cache_setup.h"

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
  int64_t windows_planned = 0;
  bool stopped = false;  // Ctrl-C stopped the run after `windows` of `windows_planned`
  double ppl_reference = 0;
  double ppl_compressed = 0;
  int64_t reference_kv_bytes = 0;  // Σ over windows of payload bytes after prefill
  int64_t compressed_kv_bytes = 0;
  // Of those, what sliding-window layers hold (CacheFootprint::window_payload_bytes): compression leaves them.
  int64_t reference_window_kv_bytes = 0;
  int64_t compressed_window_kv_bytes = 0;
  // Of the compressed cache, what RAM holds (CacheFootprint::ram_bytes): below its payload for a cache on storage.
  int64_t compressed_ram_bytes = 0;
  double compression_ratio() const {
    return reference_kv_bytes > 0 ? 1.0 - static_cast<double>(compressed_kv_bytes) / reference_kv_bytes : 0.0;
  }
  double ram_ratio() const {
    return reference_kv_bytes > 0 ? 1.0 - static_cast<double>(compressed_ram_bytes) / reference_kv_bytes : 0.0;
  }
  double seconds = 0;
};

// Next-token log-probabilities in float64, the precision every KL divergence here is computed in.
at::Tensor log_probabilities(const at::Tensor& logits);
// KL(p || q) over the last dimension, from log-probabilities (log_probabilities): one value per row.
at::Tensor kl_divergence(const at::Tensor& log_p, const at::Tensor& log_q);

KlResult evaluate_kl(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                     const CacheSetup& compressed, bool show_progress = true);

// The pieces evaluate_kl is made of, for runs that share a window's reference or prefill among setups
// (harness/kl_sweep.h). A result is a function of its windows' scores alone, so such runs equal it exactly.

// Refuses options evaluate_kl cannot run (one line naming the flag).
void check_kl_options(const LlamaModel& model, const KlOptions& options);
// Refuses a setup that picks entries per new token (retrieval) on a schedule of several tokens per pass,
// where it would attend to every entry and score KL 0.
void check_kl_schedule(const KlOptions& options, const CacheSetup& setup);
// Tokens of an n-token window that are prefilled (compressed); 0 or n when the window has nothing to score.
int64_t kl_context_tokens(int64_t n, const KlOptions& options);

// A window run on the schedule: prefill tokens [0, context), then feed [context, n-1) `chunk` at a time.
// Each forward pass's logits go to `on_logits` as they come (the prefill's last row, then each chunk's
// rows): together they predict tokens context..n-1. Returns the cache's footprint after the prefill.
using LogitsSink = std::function<void(const at::Tensor& rows)>;
CacheFootprint run_schedule(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk,
                            const CacheSetup& setup, const LogitsSink& on_logits);
// The rest of the schedule after a prefill that left `cache` filled and returned `prefill_logits` (its last row).
CacheFootprint continue_schedule(const LlamaModel& model, const std::vector<int>& tokens, int64_t context,
                                 int64_t chunk, KVCache& cache, ForwardObserver* observer,
                                 const at::Tensor& prefill_logits, const LogitsSink& on_logits);

// The reference side of a window: every logit row of its run [n - context, V], kept while the
// compressed runs are scored against it.
struct ReferenceRun {
  at::Tensor logits;
  CacheFootprint after_prefill;
};
ReferenceRun run_reference(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk);

// One window's sums; evaluate_kl adds them up over the windows in order.
struct KlWindowScore {
  double kl_sum = 0, max_kl = 0, nll_reference = 0, nll_compressed = 0;
  int64_t agreements = 0, tokens = 0;
  int64_t reference_kv_bytes = 0, compressed_kv_bytes = 0;
  int64_t reference_window_kv_bytes = 0, compressed_window_kv_bytes = 0;
  int64_t compressed_ram_bytes = 0;
  double seconds = 0;
};
// Scores a compressed run's logits against the reference's as they come, at most kScoredRowsPerBlock rows
// at a time and never across a forward pass's rows, so no run's logits are held whole.
class KlWindowScorer {
 public:
  KlWindowScorer(const ReferenceRun& reference, const std::vector<int>& tokens, int64_t context);
  void add(const at::Tensor& rows);  // the compressed run's next rows of logits
  KlWindowScore finish(const CacheFootprint& compressed_after_prefill);

 private:
  const ReferenceRun& reference_;
  at::Tensor targets_;  // [n - context, 1]
  int64_t scored_ = 0;
  KlWindowScore score_;
};

// A window's scores for `setup` run on its own schedule against `reference`.
KlWindowScore score_kl_window(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk,
                              const ReferenceRun& reference, const CacheSetup& setup);

// The result over these windows; refuses an empty set (nothing scored) in one line.
KlResult combine_kl_windows(const std::vector<KlWindowScore>& windows);

}  // namespace kvc
