#include "retrieval/kmeans.h"

#include <algorithm>
#include <limits>
#include <random>
#include <thread>

namespace kvc::retrieval {
namespace {

double sq_dist(const float* a, const float* b, int64_t d) {
  double s = 0;
  for (int64_t i = 0; i < d; ++i) {
    const double t = static_cast<double>(a[i]) - b[i];
    s += t * t;
  }
  return s;
}

// Nearest centroid for points [begin, end); returns the squared distances too.
void assign_range(const float* x, int64_t begin, int64_t end, int64_t d, const std::vector<float>& c, int64_t k,
                  std::vector<int32_t>& assign, std::vector<double>& dist) {
  for (int64_t i = begin; i < end; ++i) {
    double best = std::numeric_limits<double>::infinity();
    int32_t arg = 0;
    for (int64_t j = 0; j < k; ++j) {
      const double s = sq_dist(x + i * d, c.data() + j * d, d);
      if (s < best) best = s, arg = static_cast<int32_t>(j);
    }
    assign[i] = arg;
    dist[i] = best;
  }
}

}  // namespace

KMeansResult kmeans(const float* x, int64_t n, int64_t d, int64_t k, const KMeansOptions& options) {
  KMeansResult r;
  r.k = std::min(k, n);
  r.assign.assign(static_cast<size_t>(n), 0);
  if (r.k <= 0) return r;
  std::mt19937_64 rng(options.seed);
  r.centroids.resize(static_cast<size_t>(r.k * d));
  // k-means++: each next seed drawn with probability proportional to its squared distance.
  std::vector<double> dist(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
  int64_t pick = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  for (int64_t j = 0; j < r.k; ++j) {
    std::copy(x + pick * d, x + (pick + 1) * d, r.centroids.begin() + j * d);
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      dist[i] = std::min(dist[i], sq_dist(x + i * d, r.centroids.data() + j * d, d));
      total += dist[i];
    }
    if (total <= 0) {  // all remaining points coincide with seeds: any point will do
      pick = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
      continue;
    }
    double u = std::uniform_real_distribution<double>(0, total)(rng);
    pick = n - 1;
    for (int64_t i = 0; i < n; ++i) {
      u -= dist[i];
      if (u <= 0 && dist[i] > 0) {
        pick = i;
        break;
      }
    }
  }

  const int threads = std::max(1, options.threads);
  const bool parallel = threads > 1 && n * r.k * d >= (int64_t{1} << 16);
  std::vector<double> sums(static_cast<size_t>(r.k * d));
  std::vector<int64_t> counts(static_cast<size_t>(r.k));
  for (r.iterations = 0; r.iterations < options.iterations; ++r.iterations) {
    std::vector<int32_t> previous = r.assign;
    if (parallel) {
      std::vector<std::thread> pool;
      const int64_t chunk = (n + threads - 1) / threads;
      for (int t = 0; t < threads; ++t) {
        const int64_t b = t * chunk, e = std::min(n, b + chunk);
        if (b < e) pool.emplace_back(assign_range, x, b, e, d, std::cref(r.centroids), r.k, std::ref(r.assign), std::ref(dist));
      }
      for (auto& th : pool) th.join();
    } else {
      assign_range(x, 0, n, d, r.centroids, r.k, r.assign, dist);
    }
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      counts[r.assign[i]] += 1;
      for (int64_t t = 0; t < d; ++t) sums[r.assign[i] * d + t] += x[i * d + t];
    }
    // Empty cluster: take over the point worst served by its centroid, so no cluster is wasted.
    for (int64_t j = 0; j < r.k; ++j) {
      if (counts[j] > 0) continue;
      int64_t far = -1;
      for (int64_t i = 0; i < n; ++i)
        if (counts[r.assign[i]] > 1 && (far < 0 || dist[i] > dist[far])) far = i;
      if (far < 0) continue;
      const int32_t from = r.assign[far];
      counts[from] -= 1;
      for (int64_t t = 0; t < d; ++t) sums[from * d + t] -= x[far * d + t];
      r.assign[far] = static_cast<int32_t>(j);
      dist[far] = 0;
      counts[j] = 1;
      for (int64_t t = 0; t < d; ++t) sums[j * d + t] = x[far * d + t];
      r.reseeded += 1;
    }
    for (int64_t j = 0; j < r.k; ++j)
      if (counts[j] > 0)
        for (int64_t t = 0; t < d; ++t) r.centroids[j * d + t] = static_cast<float>(sums[j * d + t] / counts[j]);
    if (r.iterations > 0 && previous == r.assign) {
      r.iterations += 1;
      break;
    }
  }
  return r;
}

}  // namespace kvc::retrieval
