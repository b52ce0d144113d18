#include "eval/kl_divergence.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"
#include "util/progress.h"

namespace kvc {
namespace {

struct ScheduledRun {
  at::Tensor logits;  // [n - context, V]: predictions of tokens context..n-1
  CacheFootprint after_prefill;
};

ScheduledRun run_schedule(const LlamaModel& model, const std::vector<int>& tokens, int64_t context, int64_t chunk,
                          const CacheSetup& setup) {
  KVCache cache = setup.new_cache(model);
  auto observer = setup.new_observer();
  ForwardOptions prefill;
  prefill.all_logits = false;
  prefill.observer = observer.get();
  std::vector<at::Tensor> rows;
  rows.push_back(model.forward(std::vector<int>(tokens.begin(), tokens.begin() + context), cache, prefill));
  ScheduledRun run;
  run.after_prefill = cache.footprint();
  ForwardOptions step;
  step.observer = observer.get();
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t i = context; i < n - 1; i += chunk) {
    const int64_t len = std::min(chunk, n - 1 - i);
    rows.push_back(model.forward(std::vector<int>(tokens.begin() + i, tokens.begin() + i + len), cache, step));
  }
  run.logits = at::cat(rows, 0);
  return run;
}

}  // namespace

at::Tensor log_probabilities(const at::Tensor& logits) { return at::log_softmax(logits.to(at::kDouble), -1); }

at::Tensor kl_divergence(const at::Tensor& log_p, const at::Tensor& log_q) {
  return (log_p.exp() * (log_p - log_q)).sum(-1);
}

KlResult evaluate_kl(const LlamaModel& model, const std::vector<int>& ids, const KlOptions& options,
                     const CacheSetup& compressed, bool show_progress) {
  KVC_CHECK(options.context_fraction > 0 && options.context_fraction < 1,
            "--context-fraction must be in (0, 1), got {}", options.context_fraction);
  KVC_CHECK(options.chunk >= 1, "--chunk must be >= 1, got {}", options.chunk);
  KVC_CHECK(options.plan.window <= model.config().max_position_embeddings,
            "--window {} exceeds the model's context of {} tokens", options.plan.window,
            model.config().max_position_embeddings);
  CacheSetup exact;
  exact.full_precision = true;
  const auto windows = plan_windows(static_cast<int64_t>(ids.size()), options.plan);
  const auto start = std::chrono::steady_clock::now();
  KlResult r;
  double kl_sum = 0, nll_ref = 0, nll_cmp = 0;
  int64_t agree = 0;
  Progress progress("kl", static_cast<int64_t>(windows.size()), "windows", show_progress);
  for (const auto& [begin, end] : windows) {
    const int64_t n = end - begin;
    const auto context = static_cast<int64_t>(std::llround(options.context_fraction * static_cast<double>(n)));
    if (context < 1 || context >= n) continue;
    const std::vector<int> tokens(ids.begin() + begin, ids.begin() + end);
    const ScheduledRun ref = run_schedule(model, tokens, context, options.chunk, exact);
    const ScheduledRun cmp = run_schedule(model, tokens, context, options.chunk, compressed);
    const at::Tensor targets =
        at::tensor(std::vector<int64_t>(tokens.begin() + context, tokens.end()), at::kLong).unsqueeze(1);
    for (int64_t begin = 0; begin < n - context; begin += kScoredRowsPerBlock) {
      const int64_t rows = std::min(kScoredRowsPerBlock, n - context - begin);
      const at::Tensor logp_ref = log_probabilities(ref.logits.narrow(0, begin, rows));
      const at::Tensor logp_cmp = log_probabilities(cmp.logits.narrow(0, begin, rows));
      const at::Tensor kl = kl_divergence(logp_ref, logp_cmp);  // [rows]
      kl_sum += kl.sum().item<double>();
      r.max_kl = std::max(r.max_kl, kl.max().item<double>());
      agree += logp_ref.argmax(-1).eq(logp_cmp.argmax(-1)).sum().item<int64_t>();
      const at::Tensor target = targets.narrow(0, begin, rows).to(logp_ref.device());
      nll_ref -= logp_ref.gather(1, target).sum().item<double>();
      nll_cmp -= logp_cmp.gather(1, target).sum().item<double>();
    }
    r.tokens_scored += n - context;
    r.reference_kv_bytes += ref.after_prefill.payload_bytes;
    r.compressed_kv_bytes += cmp.after_prefill.payload_bytes;
    r.reference_window_kv_bytes += ref.after_prefill.window_payload_bytes;
    r.compressed_window_kv_bytes += cmp.after_prefill.window_payload_bytes;
    ++r.windows;
    progress.advance();
  }
  progress.finish();
  KVC_CHECK(r.tokens_scored > 0, "no tokens to score: windows are too short for --context-fraction");
  const auto scored = static_cast<double>(r.tokens_scored);
  r.mean_kl = kl_sum / scored;
  r.top1_agreement = static_cast<double>(agree) / scored;
  r.ppl_reference = std::exp(nll_ref / scored);
  r.ppl_compressed = std::exp(nll_cmp / scored);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kvc
