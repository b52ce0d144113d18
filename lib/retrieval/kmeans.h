#pragma once
// Lloyd's k-means with k-means++ seeding and empty clusters re-seeded with the point farthest from its
// centroid (so k clusters always come back when n >= k). Assignment is one matrix product per
// iteration (|c|² - 2 x·c, argmin per row), so it runs at the BLAS rate; it runs on the calling thread
// (callers cluster independent heads in parallel).
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
  // Cluster the points' directions (each scaled to unit norm first; the centroids are then of the unit
  // vectors): near-equal cosine similarity groups keys, whatever their norms (ClusterKV's semantic clusters).
  bool directions = false;
};

// points [n, d]; k is clamped to n (n == 0 gives k == 0).
KMeansResult kmeans(const float* points, int64_t n, int64_t d, int64_t k, const KMeansOptions& options = {});

// Clusters of about `cluster_size` points each, found separately in consecutive segments of at most
// `segment` points (0: one segment), so the cost grows linearly with n rather than as n² / cluster_size
// for k = n / cluster_size. Segment s's clusters follow segment s-1's in the result.
KMeansResult kmeans_in_segments(const float* points, int64_t n, int64_t d, int64_t cluster_size, int64_t segment,
                                const KMeansOptions& options = {});

}  // namespace kvc::retrieval
