#include "retrieval/kmeans.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <random>

#include "util/interrupt.h"

namespace kvc::retrieval {
namespace {

// Rows of the [rows, k] score block per product: a few MB whatever k is.
constexpr int64_t kScoreBlockFloats = int64_t{1} << 20;

// Nearest centroid of every point and its squared distance, by blocks of rows.
void assign_all(const at::Tensor& x, const at::Tensor& x_norms, const at::Tensor& centroids,
                std::vector<int32_t>& assign, std::vector<double>& dist) {
  const int64_t n = x.size(0), k = centroids.size(0);
  const at::Tensor c_norms = centroids.square().sum(1).unsqueeze(0);
  const at::Tensor c_t = centroids.t();
  const int64_t rows = std::max<int64_t>(1, kScoreBlockFloats / k);
  for (int64_t b = 0; b < n; b += rows) {
    const int64_t m = std::min(rows, n - b);
    // |c|² - 2 x·c: the squared distance up to |x|², which does not change the argmin.
    const at::Tensor partial = at::addmm(c_norms, x.narrow(0, b, m), c_t, 1, -2);
    const auto [best, arg] = partial.min(1);
    const float* bv = best.data_ptr<float>();
    const int64_t* ba = arg.data_ptr<int64_t>();
    const float* xn = x_norms.data_ptr<float>() + b;
    for (int64_t i = 0; i < m; ++i) {
      assign[b + i] = static_cast<int32_t>(ba[i]);
      dist[b + i] = std::max(0.0, static_cast<double>(bv[i]) + xn[i]);
    }
  }
}

}  // namespace

KMeansResult kmeans(const float* points, int64_t n, int64_t d, int64_t k, const KMeansOptions& options) {
  if (options.directions && n > 0) {
    const at::Tensor x = at::from_blob(const_cast<float*>(points), {n, d}, at::kFloat);
    const at::Tensor unit = (x / x.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12)).contiguous();
    KMeansOptions plain = options;
    plain.directions = false;
    return kmeans(unit.data_ptr<float>(), n, d, k, plain);
  }
  KMeansResult r;
  r.k = std::min(k, n);
  r.assign.assign(static_cast<size_t>(n), 0);
  if (r.k <= 0) return r;
  const at::Tensor x = at::from_blob(const_cast<float*>(points), {n, d}, at::kFloat);
  std::mt19937_64 rng(options.seed);
  r.centroids.resize(static_cast<size_t>(r.k * d));
  const at::Tensor centroids = at::from_blob(r.centroids.data(), {r.k, d}, at::kFloat);
  // k-means++: each next seed drawn with probability proportional to its squared distance (computed
  // from differences, so a point equal to a seed is at exactly 0).
  std::vector<double> dist(static_cast<size_t>(n), std::numeric_limits<double>::infinity());
  int64_t pick = static_cast<int64_t>(rng() % static_cast<uint64_t>(n));
  for (int64_t j = 0; j < r.k; ++j) {
    std::copy(points + pick * d, points + (pick + 1) * d, r.centroids.begin() + j * d);
    const at::Tensor to_seed = (x - centroids[j]).square_().sum(1);
    const float* ts = to_seed.data_ptr<float>();
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      dist[i] = std::min(dist[i], static_cast<double>(ts[i]));
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

  const at::Tensor x_norms = x.square().sum(1);
  std::vector<double> sums(static_cast<size_t>(r.k * d));
  std::vector<int64_t> counts(static_cast<size_t>(r.k));
  for (r.iterations = 0; r.iterations < options.iterations; ++r.iterations) {
    // A long prompt's layer clusters for seconds: Ctrl-C stops here rather than at the layer's end.
    stop_if_interrupted("interrupted while clustering; nothing written");
    std::vector<int32_t> previous = r.assign;
    assign_all(x, x_norms, centroids, r.assign, dist);
    std::fill(sums.begin(), sums.end(), 0.0);
    std::fill(counts.begin(), counts.end(), 0);
    for (int64_t i = 0; i < n; ++i) {
      counts[r.assign[i]] += 1;
      double* s = sums.data() + r.assign[i] * d;
      for (int64_t t = 0; t < d; ++t) s[t] += points[i * d + t];
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
      for (int64_t t = 0; t < d; ++t) sums[from * d + t] -= points[far * d + t];
      r.assign[far] = static_cast<int32_t>(j);
      dist[far] = 0;
      counts[j] = 1;
      for (int64_t t = 0; t < d; ++t) sums[j * d + t] = points[far * d + t];
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

KMeansResult kmeans_in_segments(const float* points, int64_t n, int64_t d, int64_t cluster_size, int64_t segment,
                                const KMeansOptions& options) {
  const int64_t segments = segment > 0 && n > segment ? (n + segment - 1) / segment : 1;
  KMeansResult all;
  all.assign.reserve(static_cast<size_t>(n));
  for (int64_t s = 0; s < segments; ++s) {
    // Balanced: segment sizes differ by at most one point.
    const int64_t begin = n * s / segments, end = n * (s + 1) / segments;
    KMeansOptions o = options;
    o.seed = options.seed + static_cast<uint64_t>(s);
    const KMeansResult part =
        kmeans(points + begin * d, end - begin, d, std::max<int64_t>(1, (end - begin) / cluster_size), o);
    for (int32_t a : part.assign) all.assign.push_back(static_cast<int32_t>(all.k + a));
    all.centroids.insert(all.centroids.end(), part.centroids.begin(), part.centroids.end());
    all.k += part.k;
    all.iterations = std::max(all.iterations, part.iterations);
    all.reseeded += part.reseeded;
  }
  return all;
}

}  // namespace kvc::retrieval
