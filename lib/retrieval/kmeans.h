#pragma once
// Lloyd's k-means with k-means++ seeding, multi-threaded assignment, and empty clusters re-seeded
// with the point farthest from its centroid (so k clusters always come back when n >= k).
#include <cstdint>
#include <vector>

namespace kvc::retrieval {

struct KMeansResult {
  std::vector<float> centroids;  // [k, d]
  std::vector<int32_t> assign;   // [n]
  int64_t k = 0;
  int64_t iterations = 0;
  int64_t reseeded = 0;  // empty clusters re-seeded along the way
};

struct KMeansOptions {
  int64_t iterations = 20;
  uint64_t seed = 0;
  int threads = 1;
};

// points [n, d]; k is clamped to n (n == 0 gives k == 0).
KMeansResult kmeans(const float* points, int64_t n, int64_t d, int64_t k, const KMeansOptions& options = {});

}  // namespace kvc::retrieval
