#include "retrieval/product_quantizer.h"

#include <algorithm>
#include <limits>

#include "retrieval/kmeans.h"
#include "util/error.h"

namespace kvc::retrieval {

void ProductQuantizer::train(const float* points, int64_t n, int64_t d, int64_t subspaces, int64_t bits,
                             int64_t iterations, uint64_t seed) {
  KVC_CHECK(subspaces >= 1 && d % subspaces == 0, "product quantisation: {} subspaces do not divide head_dim {}",
            subspaces, d);
  KVC_CHECK(bits >= 1 && bits <= 8, "product quantisation: bits must be in 1..8 (one byte per code), got {}", bits);
  KVC_CHECK(n >= 1, "product quantisation: no keys to train on");
  dim_ = d;
  subspaces_ = subspaces;
  sub_dim_ = d / subspaces;
  k_ = std::min<int64_t>(int64_t{1} << bits, n);
  codebooks_.assign(static_cast<size_t>(subspaces_ * k_ * sub_dim_), 0.0f);
  std::vector<float> part(static_cast<size_t>(n * sub_dim_));
  for (int64_t s = 0; s < subspaces_; ++s) {
    for (int64_t i = 0; i < n; ++i)
      std::copy(points + i * d + s * sub_dim_, points + i * d + (s + 1) * sub_dim_, part.data() + i * sub_dim_);
    KMeansOptions options;
    options.iterations = iterations;
    options.seed = seed + static_cast<uint64_t>(s);
    const KMeansResult r = kmeans(part.data(), n, sub_dim_, k_, options);
    std::copy(r.centroids.begin(), r.centroids.end(), codebooks_.begin() + s * k_ * sub_dim_);
  }
}

void ProductQuantizer::encode(const float* points, int64_t n, std::vector<uint8_t>& codes) const {
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t s = 0; s < subspaces_; ++s) {
      const float* x = points + i * dim_ + s * sub_dim_;
      int64_t best = 0;
      double best_distance = std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < k_; ++j) {
        const float* c = centroid(s, j);
        double distance = 0;
        for (int64_t e = 0; e < sub_dim_; ++e) distance += (static_cast<double>(x[e]) - c[e]) * (x[e] - c[e]);
        if (distance < best_distance) best_distance = distance, best = j;
      }
      codes.push_back(static_cast<uint8_t>(best));
    }
  }
}

std::vector<float> ProductQuantizer::score_table(const float* query) const {
  std::vector<float> table(static_cast<size_t>(subspaces_ * k_));
  for (int64_t s = 0; s < subspaces_; ++s)
    for (int64_t j = 0; j < k_; ++j) {
      const float* c = centroid(s, j);
      float dot = 0;
      for (int64_t e = 0; e < sub_dim_; ++e) dot += query[s * sub_dim_ + e] * c[e];
      table[static_cast<size_t>(s * k_ + j)] = dot;
    }
  return table;
}

std::vector<float> ProductQuantizer::approximate_scores(const std::vector<uint8_t>& codes, int64_t n,
                                                        const std::vector<float>& table) const {
  std::vector<float> scores(static_cast<size_t>(n), 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* code = codes.data() + i * subspaces_;
    float sum = 0;
    for (int64_t s = 0; s < subspaces_; ++s) sum += table[static_cast<size_t>(s * k_ + code[s])];
    scores[static_cast<size_t>(i)] = sum;
  }
  return scores;
}

}  // namespace kvc::retrieval
