#pragma once
// For each KV head, the cached row most similar in cosine to one probe row: D2O's merge target for the
// entry a decode step evicts. One pass over each head's rows computes the dot products and the rows'
// norms together, heads in parallel; the tensor-op version read the keys twice and spent more on a
// dozen small operations than the step's attention over a small cache.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvc {

struct BestCosine {
  std::vector<double> similarity;  // per head; -inf when the head has no other row
  std::vector<int64_t> row;        // per head; -1 when none
};

// probes [KV, d] and rows [KV, S, d], float32 on CPU with unit stride in d; row excluded[h] of head h
// is skipped (the probe itself). Similarity = p.r / (max(|p|, 1e-12) max(|r|, 1e-12)); ties keep the
// first row.
BestCosine best_cosine_per_head(const at::Tensor& probes, const at::Tensor& rows, const std::vector<int64_t>& excluded);

}  // namespace kvc
