#pragma once
// Next-token choice, as llama.cpp's sampler chain: repetition penalty over the last tokens, then greedy
// at temperature 0, else temperature, top-k, top-p (nucleus) and min-p filters and a draw from a seeded
// generator, so a run is reproducible from its seed.
#include <ATen/ATen.h>

#include <cstdint>
#include <random>
#include <vector>

namespace kvc {

struct SamplingParams {
  double temperature = 0.0;
  double top_p = 1.0;           // 1 = off
  int64_t top_k = 0;            // 0 = off
  double min_p = 0.0;           // 0 = off; keep tokens with p >= min_p * max p
  double repeat_penalty = 1.0;  // 1 = off; divides positive logits, multiplies negative ones
  int64_t repeat_last_n = 64;   // tokens the penalty looks back over (0 = off, -1 = all)
  uint64_t seed = 0;
  std::vector<int> penalty_context;  // tokens before the first sampled one (the prompt), for the penalty
};

// kvc::Error naming the flag when a value is out of range.
void validate_sampling(const SamplingParams& params);

// The filters alone, on plain numbers, so tests can compare them with a brute-force computation.
// Logits with the penalty applied for the tokens in `recent`.
std::vector<double> apply_repeat_penalty(std::vector<double> logits, const std::vector<int>& recent, double penalty);
// Candidate token ids that survive top-k, then top-p, then min-p over probabilities `probs`, most
// probable first (ties by lower id).
std::vector<int64_t> filter_candidates(const std::vector<double>& probs, int64_t top_k, double top_p, double min_p);

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int sample(const at::Tensor& logits);  // logits: [vocab] float32

 private:
  std::vector<int> recent_tokens() const;

  SamplingParams params_;
  std::vector<int> history_;  // penalty_context, then every sampled token
  std::mt19937_64 rng_;
};

}  // namespace kvc
