#pragma once
// Perplexity with the reference protocol: ids = [BOS] + encode(file), consecutive non-overlapping
// windows of `window` tokens (the last may be shorter); in each window every token but the first is
// scored given the window's preceding tokens; ppl = exp(total NLL / tokens scored).
#include <cstdint>
#include <vector>

#include "model/llama_model.h"

namespace kvc {

struct WindowPlan {
  int64_t window = 256;
  int64_t max_windows = 0;  // 0: all
};

// [begin, end) token ranges of the windows the protocol scores.
std::vector<std::pair<int64_t, int64_t>> plan_windows(int64_t num_tokens, const WindowPlan& plan);

struct PerplexityResult {
  double ppl = 0;
  double total_nll = 0;
  int64_t tokens_scored = 0;
  int64_t windows = 0;
  double seconds = 0;
};

PerplexityResult evaluate_perplexity(const LlamaModel& model, const std::vector<int>& ids, const WindowPlan& plan,
                                     bool show_progress = true);

// Σ -log p(target) over rows of logits [T, V] for targets [T].
double total_nll(const at::Tensor& logits, const std::vector<int>& targets);

}  // namespace kvc
