#pragma once
// A cluster's summary: size n, centroid r and variance σ² = mean squared distance to r, updated per
// new entry in O(d) with Welford's recurrence (no pass over the members, which may sit on storage):
//   r' = r + (k - r) / (n + 1),   M2' = M2 + (k - r)·(k - r'),   σ² = M2 / n.
#include <cstdint>
#include <vector>

namespace kvc::retrieval {

struct ClusterStats {
  int64_t n = 0;
  std::vector<double> mean;
  double m2 = 0;

  explicit ClusterStats(int64_t d = 0) : mean(static_cast<size_t>(d), 0.0) {}
  double variance() const { return n > 0 ? m2 / static_cast<double>(n) : 0.0; }

  void add(const float* k) {
    const size_t d = mean.size();
    n += 1;
    double dot = 0;
    for (size_t i = 0; i < d; ++i) {
      const double before = k[i] - mean[i];
      mean[i] += before / static_cast<double>(n);
      dot += before * (k[i] - mean[i]);
    }
    m2 += dot;
  }
  // The variance the cluster would have with k added, without changing it.
  double variance_with(const float* k) const {
    ClusterStats copy = *this;
    copy.add(k);
    return copy.variance();
  }
  double sq_distance(const float* k) const {
    double s = 0;
    for (size_t i = 0; i < mean.size(); ++i) s += (k[i] - mean[i]) * (k[i] - mean[i]);
    return s;
  }
  // From scratch (two-pass), for fresh clusters after k-means or a split.
  static ClusterStats of(const float* points, int64_t count, int64_t d) {
    ClusterStats s(d);
    s.n = count;
    if (count == 0) return s;
    for (int64_t j = 0; j < count; ++j)
      for (int64_t i = 0; i < d; ++i) s.mean[i] += points[j * d + i];
    for (auto& m : s.mean) m /= static_cast<double>(count);
    for (int64_t j = 0; j < count; ++j) s.m2 += s.sq_distance(points + j * d);
    return s;
  }
};

}  // namespace kvc::retrieval
