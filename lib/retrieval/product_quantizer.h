#pragma once
// Product quantisation of one head's keys (Jégou et al. 2011; PQCache, Zhang et al. 2024, arXiv:2407.12820):
// the head dimension is cut into `subspaces` equal parts, each part's keys are clustered by k-means into
// at most 2^bits centroids, and a key is stored as the index of its nearest centroid in each part (one
// byte per part). A query scores every key approximately, q·k ≈ Σ_s q_s · c_s[code_s], from one table of
// q_s · c_s[j] per query: the search that picks which keys to read back exactly.
#include <cstdint>
#include <vector>

namespace kvc::retrieval {

class ProductQuantizer {
 public:
  // Trains on points [n, d] (d a multiple of subspaces; bits in 1..8); k = min(2^bits, n) per part.
  void train(const float* points, int64_t n, int64_t d, int64_t subspaces, int64_t bits, int64_t iterations,
             uint64_t seed);
  bool trained() const { return !codebooks_.empty(); }
  int64_t subspaces() const { return subspaces_; }
  int64_t centroids() const { return k_; }  // per subspace
  int64_t dim() const { return dim_; }
  // Centroid j of subspace s: dim / subspaces floats.
  const float* centroid(int64_t s, int64_t j) const { return codebooks_.data() + (s * k_ + j) * sub_dim_; }

  // Appends the codes of points [n, d]: the nearest centroid of each part (first on ties).
  void encode(const float* points, int64_t n, std::vector<uint8_t>& codes) const;
  // table [subspaces, k]: q_s · c_s[j] of query [d].
  std::vector<float> score_table(const float* query) const;
  // Approximate scores of the first n coded keys: Σ_s table[s][code_s].
  std::vector<float> approximate_scores(const std::vector<uint8_t>& codes, int64_t n,
                                        const std::vector<float>& table) const;
  int64_t codebook_bytes() const { return static_cast<int64_t>(codebooks_.size() * sizeof(float)); }

 private:
  int64_t dim_ = 0, subspaces_ = 0, sub_dim_ = 0, k_ = 0;
  std::vector<float> codebooks_;  // [subspaces, k, sub_dim]
};

}  // namespace kvc::retrieval
