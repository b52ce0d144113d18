#pragma once
// A cluster's summary: size n, centroid r and variance σ² = mean squared distance to r, updated per
// new entry in O(d) with Welford's recurrence (no pass over the members, which may sit on storage):
//   r' = r + (k - r) / (n + 1),   M2' = M2 + (k - r)·(k - r'),   σ² = M2 / n.
// The centroid is a float row owned by the head's CentroidTable (so all of a head's centroids are one
// matrix to score); the arithmetic is in double, the stored centroid rounded to float.
#include <cstdint>

namespace kvc::retrieval {

struct ClusterStats {
  int64_t n = 0;
  double m2 = 0;

  double variance() const { return n > 0 ? m2 / static_cast<double>(n) : 0.0; }

  // Adds k to the cluster whose centroid is `mean` [d], updating both.
  void add(float* mean, const float* k, int64_t d) {
    n += 1;
    m2 += update(mean, k, d, n, mean);
  }
  // The variance the cluster would have with k added, without changing it.
  double variance_with(const float* mean, const float* k, int64_t d) const {
    return (m2 + update(mean, k, d, n + 1, nullptr)) / static_cast<double>(n + 1);
  }
  // From scratch (two-pass), for fresh clusters after k-means or a split; writes the centroid to `mean`.
  static ClusterStats of(const float* points, int64_t count, int64_t d, float* mean) {
    ClusterStats s;
    s.n = count;
    for (int64_t i = 0; i < d; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < count; ++j) sum += points[j * d + i];
      mean[i] = count > 0 ? static_cast<float>(sum / static_cast<double>(count)) : 0.0f;
    }
    for (int64_t j = 0; j < count; ++j)
      for (int64_t i = 0; i < d; ++i) {
        const double t = static_cast<double>(points[j * d + i]) - mean[i];
        s.m2 += t * t;
      }
    return s;
  }

 private:
  // Σ_i (k_i - r_i)(k_i - r'_i) for a cluster that now has `count` members; writes r' to `out` if given.
  static double update(const float* mean, const float* k, int64_t d, int64_t count, float* out) {
    double dot = 0;
    for (int64_t i = 0; i < d; ++i) {
      const double before = static_cast<double>(k[i]) - mean[i];
      const float after_mean = static_cast<float>(mean[i] + before / static_cast<double>(count));
      dot += before * (static_cast<double>(k[i]) - after_mean);
      if (out) out[i] = after_mean;
    }
    return dot;
  }
};

}  // namespace kvc::retrieval
