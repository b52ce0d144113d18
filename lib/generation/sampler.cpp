#include "generation/sampler.h"

#include <algorithm>
#include <numeric>

#include "util/error.h"

namespace kvc {

void validate_sampling(const SamplingParams& params) {
  KVC_CHECK(params.temperature >= 0, "--temperature must be >= 0 (0 = greedy), got {}", params.temperature);
  KVC_CHECK(params.top_p > 0 && params.top_p <= 1, "--top-p must be in (0, 1], got {}", params.top_p);
  KVC_CHECK(params.top_k >= 0, "--top-k must be >= 0 (0 = off), got {}", params.top_k);
  KVC_CHECK(params.min_p >= 0 && params.min_p <= 1, "--min-p must be in [0, 1] (0 = off), got {}", params.min_p);
  KVC_CHECK(params.repeat_penalty > 0, "--repeat-penalty must be > 0 (1 = off), got {}", params.repeat_penalty);
  KVC_CHECK(params.repeat_last_n >= -1, "--repeat-last-n must be >= -1 (-1 = all, 0 = off), got {}",
            params.repeat_last_n);
}

std::vector<double> apply_repeat_penalty(std::vector<double> logits, const std::vector<int>& recent, double penalty) {
  std::vector<int> seen(recent);
  std::sort(seen.begin(), seen.end());
  seen.erase(std::unique(seen.begin(), seen.end()), seen.end());  // a token is penalised once, however often
  for (int id : seen) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) continue;
    double& l = logits[static_cast<size_t>(id)];
    l = l > 0 ? l / penalty : l * penalty;
  }
  return logits;
}

std::vector<int64_t> filter_candidates(const std::vector<double>& probs, int64_t top_k, double top_p, double min_p) {
  std::vector<int64_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return probs[a] > probs[b]; });
  if (top_k > 0 && static_cast<size_t>(top_k) < order.size()) order.resize(static_cast<size_t>(top_k));
  // top-p over the candidates left (renormalised): the smallest prefix whose share reaches top_p.
  double total = 0;
  for (int64_t id : order) total += probs[id];
  size_t keep = 0;
  double mass = 0;
  while (keep < order.size() && (keep == 0 || mass < top_p * total)) mass += probs[order[keep++]];
  order.resize(keep);
  // min-p: relative to the most probable token.
  const double floor = min_p * probs[order.front()];
  size_t kept = 1;
  while (kept < order.size() && probs[order[kept]] >= floor) ++kept;
  order.resize(kept);
  return order;
}

Sampler::Sampler(const SamplingParams& params) : params_(params), history_(params.penalty_context), rng_(params.seed) {
  validate_sampling(params);
}

std::vector<int> Sampler::recent_tokens() const {
  if (params_.repeat_last_n < 0 || static_cast<size_t>(params_.repeat_last_n) >= history_.size()) return history_;
  return std::vector<int>(history_.end() - params_.repeat_last_n, history_.end());
}

int Sampler::sample(const at::Tensor& logits) {
  at::Tensor l = logits.reshape(-1).to(at::kCPU, at::kFloat);
  if (params_.repeat_penalty != 1.0 && params_.repeat_last_n != 0) {
    const at::Tensor c = l.to(at::kDouble).contiguous();
    const std::vector<double> penalised =
        apply_repeat_penalty(std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel()),
                             recent_tokens(), params_.repeat_penalty);
    l = at::tensor(penalised, at::kDouble).to(at::kFloat);
  }
  int chosen = 0;
  if (params_.temperature == 0.0) {
    chosen = static_cast<int>(l.argmax().item<int64_t>());
  } else {
    const at::Tensor probs = at::softmax(l / params_.temperature, 0, at::kDouble).contiguous();
    const std::vector<double> p(probs.data_ptr<double>(), probs.data_ptr<double>() + probs.numel());
    const std::vector<int64_t> candidates = filter_candidates(p, params_.top_k, params_.top_p, params_.min_p);
    double mass = 0;
    for (int64_t id : candidates) mass += p[id];
    const double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
    double acc = 0;
    chosen = static_cast<int>(candidates.back());
    for (int64_t id : candidates) {
      acc += p[id];
      if (u < acc) {
        chosen = static_cast<int>(id);
        break;
      }
    }
  }
  history_.push_back(chosen);
  return chosen;
}

}  // namespace kvc
