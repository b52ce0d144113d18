#include "eval/kl_divergence.h"

#include <algorithm>
#include <cmath>

#include "util/clock.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc {

CacheFootprint continue_schedule(const LlamaModel& model, const std::vector<int>& tokens, int64_t context,
                                 int64_t chunk, KVCache& cache, ForwardObserver* observer,
                                 const at::Tensor& prefill_logits, const LogitsSink& on_logits) {
  const CacheFootprint after_prefill = cache.footprint();
  on_logits(prefill_logits);
  ForwardOptions step;
  step.observer = observer;
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t i = context; i < n - 1; i += chunk) {
    const int64_t len = std::min(chunk, n - 1 - i);
    on_logits(model.forward(std::vector<int>(tokens.begin() + i, tokens.begin() + i + len), cache, step));
  }
  return after_prefill;
}

CacheFootprint run_schedule(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk,
                            const CacheSetup& setup, const LogitsSink& on_logits) {
  KVCache cache = setup.new_cache(model);
  auto observer = setup.new_observer();
  ForwardOptions prefill;
  prefill.all_logits = false;
  prefill.observer = observer.get();
  const at::Tensor last = model.forward(std::vector<int>(tokens.begin(), tokens.begin() + context), cache, prefill);
  return continue_schedule(model, tokens, context, chunk, cache, observer.get(), last, on_logits);
}

ReferenceRun run_reference(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk) {
  CacheSetup exact;
  exact.full_precision = true;
  ReferenceRun run;
  int64_t filled = 0;
  const auto rows = static_cast<int64_t>(tokens.size()) - context;
  run.after_prefill = run_schedule(model, tokens, context, chunk, exact, [&](const at::Tensor& logits) {
    if (!run.logits.defined()) run.logits = at::empty({rows, logits.size(1)}, logits.options());
    run.logits.narrow(0, filled, logits.size(0)).copy_(logits);
    filled += logits.size(0);
  });
  return run;
}

at::Tensor log_probabilities(const at::Tensor& logits) { return at::log_softmax(logits.to(at::kDouble), -1); }

at::Tensor kl_divergence(const at::Tensor& log_p, const at::Tensor& log_q) {
  return (log_p.exp() * (log_p - log_q)).sum(-1);
}

void check_kl_options(const LlamaModel& model, const KlOptions& options) {
  KVC_CHECK(options.context_fraction > 0 && options.context_fraction < 1,
            "--context-fraction must be in (0, 1), got {}", options.context_fraction);
  KVC_CHECK(options.chunk >= 1, "--chunk must be >= 1, got {}", options.chunk);
  KVC_CHECK(options.plan.window <= model.config().max_position_embeddings,
            "--window {} exceeds the model's context of {} tokens", options.plan.window,
            model.config().max_position_embeddings);
}

void check_kl_schedule(const KlOptions& options, const CacheSetup& setup) {
  KVC_CHECK(!setup.selects_per_token || options.chunk == 1,
            "{} with --chunk {}: a retrieval cache picks entries for one new token at a time, and a pass of {} "
            "tokens attends to every entry (KL 0); use --chunk 1",
            setup.name, options.chunk, options.chunk);
}

int64_t kl_context_tokens(int64_t n, const KlOptions& options) {
  return static_cast<int64_t>(std::llround(options.context_fraction * static_cast<double>(n)));
}

KlWindowScorer::KlWindowScorer(const ReferenceRun& reference, const std::vector<int>& tokens, int64_t context)
    : reference_(reference),
      targets_(at::tensor(std::vector<int64_t>(tokens.begin() + context, tokens.end()), at::kLong).unsqueeze(1)) {}

void KlWindowScorer::add(const at::Tensor& rows) {
  KVC_CHECK(scored_ + rows.size(0) <= targets_.size(0), "kl: {} logit rows for {} targets", scored_ + rows.size(0),
            targets_.size(0));
  for (int64_t begin = 0; begin < rows.size(0); begin += kScoredRowsPerBlock) {
    const int64_t n = std::min(kScoredRowsPerBlock, rows.size(0) - begin);
    const at::Tensor logp_ref = log_probabilities(reference_.logits.narrow(0, scored_ + begin, n));
    const at::Tensor logp_cmp = log_probabilities(rows.narrow(0, begin, n));
    const at::Tensor kl = kl_divergence(logp_ref, logp_cmp);  // [n]
    score_.kl_sum += kl.sum().item<double>();
    score_.max_kl = std::max(score_.max_kl, kl.max().item<double>());
    score_.agreements += logp_ref.argmax(-1).eq(logp_cmp.argmax(-1)).sum().item<int64_t>();
    const at::Tensor target = targets_.narrow(0, scored_ + begin, n).to(logp_ref.device());
    score_.nll_reference -= logp_ref.gather(1, target).sum().item<double>();
    score_.nll_compressed -= logp_cmp.gather(1, target).sum().item<double>();
  }
  scored_ += rows.size(0);
}

KlWindowScore KlWindowScorer::finish(const CacheFootprint& compressed_after_prefill) {
  KVC_CHECK(scored_ == targets_.size(0), "kl: {} logit rows for {} targets", scored_, targets_.size(0));
  score_.tokens = scored_;
  score_.reference_kv_bytes = reference_.after_prefill.payload_bytes;
  score_.compressed_kv_bytes = compressed_after_prefill.payload_bytes;
  score_.reference_window_kv_bytes = reference_.after_prefill.window_payload_bytes;
  score_.compressed_window_kv_bytes = compressed_after_prefill.window_payload_bytes;
  score_.compressed_ram_bytes = compressed_after_prefill.ram_bytes;
  return score_;
}

KlWindowScore score_kl_window(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk,
                              const ReferenceRun& reference, const CacheSetup& setup) {
  KlWindowScorer scorer(reference, tokens, context);
  const CacheFootprint after_prefill =
      run_schedule(model, tokens, context, chunk, setup, [&](const at::Tensor& rows) { scorer.add(rows); });
  return scorer.finish(after_prefill);
}

KlResult combine_kl_windows(const std::vector<KlWindowScore>& windows) {
  KlResult r;
  double kl_sum = 0, nll_ref = 0, nll_cmp = 0;
  int64_t agree = 0;
  for (const KlWindowScore& w : windows) {
    kl_sum += w.kl_sum;
    r.max_kl = std::max(r.max_kl, w.max_kl);
    agree += w.agreements;
    nll_ref += w.nll_reference;
    nll_cmp += w.nll_compressed;
    r.tokens_scored += w.tokens;
    r.reference_kv_bytes += w.reference_kv_bytes;
    r.compressed_kv_bytes += w.compressed_kv_bytes;
    r.reference_window_kv_bytes += w.reference_window_kv_bytes;
    r.compressed_window_kv_bytes += w.compressed_window_kv_bytes;
    r.compressed_ram_bytes += w.compressed_ram_bytes;
    r.seconds += w.seconds;
    ++r.windows;
  }
  if (r.tokens_scored == 0 && interrupted()) throw InterruptedError("interrupted before the first window was scored");
  KVC_CHECK(r.tokens_scored > 0, "no tokens to score: windows are too short for --context-fraction");
  const auto scored = static_cast<double>(r.tokens_scored);
  r.mean_kl = kl_sum / scored;
  r.top1_agreement = static_cast<double>(agree) / scored;
  r.ppl_reference = std::exp(nll_ref / scored);
  r.ppl_compressed = std::exp(nll_cmp / scored);
  return r;
}

KlResult evaluate_kl(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                     const CacheSetup& compressed, bool show_progress) {
  check_kl_options(model, options);
  check_kl_schedule(options, compressed);
  const auto windows = plan_windows(static_cast<int64_t>(ids.size()), options.plan);
  std::vector<KlWindowScore> scores;
  Progress progress("kl", static_cast<int64_t>(windows.size()), "windows", show_progress);
  bool stopped = false;
  for (const auto& [begin, end] : windows) {
    if ((stopped = interrupted())) break;  // Ctrl-C: the windows scored so far are the result
    const auto start = SteadyClock::now();
    const int64_t context = kl_context_tokens(end - begin, options);
    if (context < 1 || context >= end - begin) continue;
    const std::vector<int> tokens(ids.begin() + begin, ids.begin() + end);
    const ReferenceRun reference = run_reference(model, tokens, context, options.chunk);
    scores.push_back(score_kl_window(model, tokens, context, options.chunk, reference, compressed));
    scores.back().seconds = seconds_since(start);
    progress.advance();
  }
  progress.finish();
  KlResult r = combine_kl_windows(scores);
  r.windows_planned = static_cast<int64_t>(windows.size());
  r.stopped = stopped;
  return r;
}

}  // namespace kvc
