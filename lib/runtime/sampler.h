#pragma once
// Next-token choice: greedy at temperature 0, else temperature + nucleus (top-p) sampling from a
// seeded generator, so a run is reproducible from its seed.
#include <ATen/ATen.h>

#include <cstdint>
#include <random>

namespace kvc {

struct SamplingParams {
  double temperature = 0.0;
  double top_p = 1.0;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  int sample(const at::Tensor& logits);  // logits: [vocab] float32

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

}  // namespace kvc
