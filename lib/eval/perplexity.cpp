#include "eval/perplexity.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc {

std::vector<std::pair<int64_t, int64_t>> plan_windows(int64_t num_tokens, const WindowPlan& plan) {
  KVC_CHECK(plan.window >= 2, "--window must be at least 2 tokens, got {}", plan.window);
  KVC_CHECK(plan.max_windows >= 0, "--max-windows must be >= 0 (0 = all), got {}", plan.max_windows);
  std::vector<std::pair<int64_t, int64_t>> windows;
  const bool full_only = plan.protocol == PerplexityProtocol::LlamaCpp;
  for (int64_t begin = 0; begin < num_tokens; begin += plan.window) {
    if (full_only && begin + plan.window > num_tokens) break;
    if (plan.max_windows > 0 && static_cast<int64_t>(windows.size()) == plan.max_windows) break;
    windows.emplace_back(begin, std::min(num_tokens, begin + plan.window));
  }
  return windows;
}

double total_nll(const at::Tensor& logits, const std::vector<int>& targets) {
  const at::Tensor idx =
      at::tensor(std::vector<int64_t>(targets.begin(), targets.end()), at::kLong).unsqueeze(1).to(logits.device());
  double nll = 0;
  for (int64_t begin = 0; begin < logits.size(0); begin += kScoredRowsPerBlock) {
    const int64_t rows = std::min(kScoredRowsPerBlock, logits.size(0) - begin);
    const at::Tensor logp = at::log_softmax(logits.narrow(0, begin, rows).to(at::kDouble), -1);
    nll -= logp.gather(1, idx.narrow(0, begin, rows)).sum().item<double>();
  }
  return nll;
}

PerplexityResult evaluate_perplexity(const LlamaModel& model, const std::vector<int>& ids, const WindowPlan& plan,
                                     bool show_progress) {
  KVC_CHECK(plan.window <= model.config().max_position_embeddings,
            "--window {} exceeds the model's context of {} tokens", plan.window,
            model.config().max_position_embeddings);
  const auto windows = plan_windows(static_cast<int64_t>(ids.size()), plan);
  const auto start = std::chrono::steady_clock::now();
  PerplexityResult r;
  Progress progress("ppl", static_cast<int64_t>(windows.size()), "windows", show_progress);
  r.windows_planned = static_cast<int64_t>(windows.size());
  for (const auto& [begin, end] : windows) {
    if ((r.stopped = interrupted())) break;  // Ctrl-C: the windows scored so far are the result
    if (end - begin < 2) continue;           // a one-token window has nothing to score
    std::vector<int> tokens(ids.begin() + begin, ids.begin() + end);
    // Rows [first, n-1) of the logits predict tokens [first+1, n).
    int64_t first = 0;
    if (plan.protocol == PerplexityProtocol::LlamaCpp) {
      if (plan.window_bos) tokens[0] = *plan.window_bos;
      first = plan.window / 2;
    }
    KVCache cache = model.new_cache();
    const at::Tensor logits = model.forward(tokens, cache);  // [n, V]
    const int64_t n = end - begin;
    const std::vector<int> targets(tokens.begin() + first + 1, tokens.end());
    r.total_nll += total_nll(logits.narrow(0, first, n - first - 1), targets);
    r.tokens_scored += n - first - 1;
    ++r.windows;
    r.running_ppl.push_back(std::exp(r.total_nll / static_cast<double>(r.tokens_scored)));
    progress.advance();
  }
  progress.finish();
  if (r.tokens_scored == 0 && interrupted()) throw InterruptedError("interrupted before the first window was scored");
  KVC_CHECK(r.tokens_scored > 0, "no tokens to score: the text is shorter than two tokens");
  r.ppl = std::exp(r.total_nll / static_cast<double>(r.tokens_scored));
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace kvc
