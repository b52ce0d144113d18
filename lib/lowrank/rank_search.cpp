#include "lowrank/rank_search.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <tuple>

#include "util/error.h"

namespace kvc::lowrank {
namespace {

// A matrix's eigenvalues as shares of their sum (negative rounding noise counts as zero).
std::vector<double> shares(const at::Tensor& eigenvalues) {
  const at::Tensor e = eigenvalues.to(at::kDouble).clamp_min(0).contiguous();
  const double total = e.sum().item<double>();
  const at::Tensor s = total > 0 ? e / total : e;
  return std::vector<double>(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
}

}  // namespace

RankAllocation search_ranks(const Artifact& bases, const std::vector<int64_t>& layers, double kept_share) {
  KVC_CHECK(!bases.is_gates(), "--lowrank: share= searches fixed ranks in a bases file; '{}' holds gates", bases.path);
  KVC_CHECK(std::isfinite(kept_share) && kept_share > 0 && kept_share <= 1,
            "--lowrank: share must be in (0, 1] (the kept share of the cache), got {}", kept_share);
  KVC_CHECK(!layers.empty(), "--lowrank: no layer to search ranks for");
  const int64_t d = bases.layers.at(static_cast<size_t>(layers[0])).key.eigenvalues.numel();
  const auto n = static_cast<int64_t>(layers.size());
  const auto budget = static_cast<int64_t>(std::floor(kept_share * static_cast<double>(2 * n * d) + 1e-9));
  KVC_CHECK(budget >= 2 * n,
            "--lowrank: share={} keeps {} of {} coefficients per token, fewer than one direction "
            "for the keys and one for the values of each of the {} layers; use share >= {:.4g}",
            kept_share, budget, 2 * n * d, n, 1.0 / static_cast<double>(d));

  // Matrix m = 2·i (keys of layers[i]) or 2·i + 1 (values); each starts with its first direction.
  std::vector<std::vector<double>> gain;
  for (const int64_t l : layers) {
    const LayerBasis& b = bases.layers.at(static_cast<size_t>(l));
    gain.push_back(shares(b.key.eigenvalues));
    gain.push_back(shares(b.value.eigenvalues));
  }
  std::vector<int64_t> rank(gain.size(), 1);
  RankAllocation a;
  a.keys.assign(bases.layers.size(), 0);
  a.values.assign(bases.layers.size(), 0);
  a.coefficients = 2 * n;
  // Largest next gain first; ties go to the lower matrix index, so the result does not depend on order.
  using Next = std::tuple<double, int64_t>;  // (gain, -matrix)
  std::priority_queue<Next> next;
  for (size_t m = 0; m < gain.size(); ++m) {
    a.explained += gain[m][0];
    if (d > 1) next.emplace(gain[m][1], -static_cast<int64_t>(m));
  }
  while (a.coefficients < budget && !next.empty()) {
    const auto [g, neg_m] = next.top();
    next.pop();
    const auto m = static_cast<size_t>(-neg_m);
    a.explained += g;
    ++a.coefficients;
    if (++rank[m] < d) next.emplace(gain[m][static_cast<size_t>(rank[m])], neg_m);
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    a.keys[static_cast<size_t>(layers[i])] = rank[2 * i];
    a.values[static_cast<size_t>(layers[i])] = rank[2 * i + 1];
  }
  return a;
}

}  // namespace kvc::lowrank
