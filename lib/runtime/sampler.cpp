#include "runtime/sampler.h"

#include "util/error.h"

namespace kvc {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  KVC_CHECK(params.temperature >= 0, "--temperature must be >= 0 (0 = greedy), got {}", params.temperature);
  KVC_CHECK(params.top_p > 0 && params.top_p <= 1, "--top-p must be in (0, 1], got {}", params.top_p);
}

int Sampler::sample(const at::Tensor& logits) {
  const at::Tensor l = logits.reshape(-1).to(at::kCPU, at::kFloat);
  if (params_.temperature == 0.0) return static_cast<int>(l.argmax().item<int64_t>());
  const at::Tensor probs = at::softmax(l / params_.temperature, 0, at::kDouble);
  const auto sorted = probs.sort(0, /*descending=*/true);
  const at::Tensor p = std::get<0>(sorted).contiguous();
  const at::Tensor idx = std::get<1>(sorted).contiguous();
  const double* pp = p.data_ptr<double>();
  const int64_t* ip = idx.data_ptr<int64_t>();
  // Smallest prefix whose mass reaches top_p, then draw within it.
  int64_t keep = 0;
  double mass = 0;
  while (keep < p.numel() && (keep == 0 || mass < params_.top_p)) mass += pp[keep++];
  const double u = std::uniform_real_distribution<double>(0.0, mass)(rng_);
  double acc = 0;
  for (int64_t i = 0; i < keep; ++i) {
    acc += pp[i];
    if (u < acc) return static_cast<int>(ip[i]);
  }
  return static_cast<int>(ip[keep - 1]);
}

}  // namespace kvc
