#pragma once
// Perplexity over consecutive non-overlapping windows of ids (a file tokenized as a prompt: BOS first where the
// tokenizer adds one), with one of two protocols:
// - reference (Hugging Face's usual evaluation): windows of `window` tokens (the last may be shorter); in
//   each every token but the first is scored given the window's preceding tokens;
// - llama.cpp (llama-perplexity's): full windows only; each window's first token becomes BOS when the
//   tokenizer adds one (WindowPlan::window_bos), and only
//   the second half is scored (the first `window`/2 tokens are context), so the two tools' numbers
//   compare on the same tokens.
// ppl = exp(total NLL / tokens scored).
#include <cstdint>
#include <optional>
#include <vector>

#include "model/llama_model.h"

namespace kvc {

enum class PerplexityProtocol { Reference, LlamaCpp };

struct WindowPlan {
  int64_t window = 256;
  int64_t max_windows = 0;  // 0: all
  PerplexityProtocol protocol = PerplexityProtocol::Reference;
  // llama.cpp protocol: the id each window's first token becomes (Tokenizer::prompt_bos); nullopt keeps
  // the window's own first token, as llama-perplexity does for a vocabulary that adds no BOS.
  std::optional<int> window_bos;
};

// [begin, end) token ranges of the windows the protocol scores.
std::vector<std::pair<int64_t, int64_t>> plan_windows(int64_t num_tokens, const WindowPlan& plan);

struct PerplexityResult {
  double ppl = 0;
  double total_nll = 0;
  int64_t tokens_scored = 0;
  int64_t windows = 0;
  int64_t windows_planned = 0;
  bool stopped = false;  // Ctrl-C stopped the run after `windows` of `windows_planned`
  double seconds = 0;
  std::vector<double> running_ppl;  // the perplexity after each window (llama-perplexity prints the same)
};

PerplexityResult evaluate_perplexity(const LlamaModel& model, const std::vector<int>& ids, const WindowPlan& plan,
                                     bool show_progress = true);

// Rows of logits scored at a time: at a real model's vocabulary (262,144 entries for Gemma 3) a whole
// window's log-probabilities in double would take gigabytes.
inline constexpr int64_t kScoredRowsPerBlock = 64;

// Σ -log p(target) over rows of logits [T, V] for targets [T], kScoredRowsPerBlock rows at a time.
double total_nll(const at::Tensor& logits, const std::vector<int>& targets);

}  // namespace kvc
