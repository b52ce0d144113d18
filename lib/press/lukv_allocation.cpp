#include "press/lukv_allocation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>

#include "util/error.h"

namespace kvc {
namespace {

// The heads in the order the greedy allocation gives them units, from nothing to every unit.
std::vector<int64_t> greedy_order(const at::Tensor& utility) {
  KVC_CHECK(utility.dim() == 2 && utility.size(1) >= 2, "LU-KV utility curves must be [heads, grid + 1], got {}",
            fmt::join(utility.sizes(), " x "));
  const int64_t n = utility.size(0), grid = utility.size(1) - 1;
  const at::Tensor u = utility.to(at::kDouble).contiguous();
  std::vector<std::vector<double>> gains(static_cast<size_t>(n));
  for (int64_t h = 0; h < n; ++h) {
    const double* row = u.data_ptr<double>() + h * (grid + 1);
    const std::vector<double> env = upper_concave_envelope(std::vector<double>(row, row + grid + 1));
    for (int64_t g = 0; g < grid; ++g) gains[static_cast<size_t>(h)].push_back(env[g + 1] - env[g]);
  }
  // (gain of the head's next unit, head): the largest gain first, the lower head on a tie.
  using Next = std::pair<double, int64_t>;
  auto later = [](const Next& a, const Next& b) {
    return a.first < b.first || (a.first == b.first && a.second > b.second);
  };
  std::priority_queue<Next, std::vector<Next>, decltype(later)> heap(later);
  std::vector<int64_t> given(static_cast<size_t>(n), 0), order;
  order.reserve(static_cast<size_t>(n * grid));
  for (int64_t h = 0; h < n; ++h) heap.emplace(gains[static_cast<size_t>(h)][0], h);
  while (!heap.empty()) {
    const int64_t h = heap.top().second;
    heap.pop();
    order.push_back(h);
    const auto next = static_cast<size_t>(++given[static_cast<size_t>(h)]);
    if (static_cast<int64_t>(next) < grid) heap.emplace(gains[static_cast<size_t>(h)][next], h);
  }
  return order;
}

at::Tensor units_of_first(const std::vector<int64_t>& order, int64_t n, int64_t count) {
  at::Tensor units = at::zeros({n}, at::kLong);
  auto* u = units.data_ptr<int64_t>();
  for (int64_t i = 0; i < count; ++i) ++u[order[static_cast<size_t>(i)]];
  return units;
}

}  // namespace

at::Tensor retained_oracle_share(const at::Tensor& ranking, const at::Tensor& oracle, int64_t grid) {
  KVC_CHECK(ranking.dim() == 2 && ranking.sizes() == oracle.sizes(),
            "LU-KV: scores {} and oracle importance {} must both be [heads, entries]",
            fmt::join(ranking.sizes(), " x "), fmt::join(oracle.sizes(), " x "));
  KVC_CHECK(grid >= 1, "LU-KV: the budget grid needs at least one step, got {}", grid);
  const int64_t n = ranking.size(0), s = ranking.size(1);
  // Stable: among equal scores the older entry is kept first.
  const at::Tensor order = std::get<1>(at::sort(ranking.to(at::kDouble), /*stable=*/true, 1, /*descending=*/true));
  const at::Tensor held = oracle.to(at::kDouble).gather(1, order).cumsum(1).contiguous();  // [n, s]
  at::Tensor out = at::ones({n, grid + 1}, at::kDouble);
  auto* o = out.data_ptr<double>();
  const auto* c = held.data_ptr<double>();
  for (int64_t h = 0; h < n; ++h) {
    const double total = s > 0 ? c[h * s + s - 1] : 0.0;
    if (!(total > 0)) continue;  // no oracle mass: no budget gains anything
    for (int64_t g = 0; g <= grid; ++g) {
      const int64_t k = std::llround(static_cast<double>(g) * static_cast<double>(s) / static_cast<double>(grid));
      o[h * (grid + 1) + g] = k == 0 ? 0.0 : c[h * s + k - 1] / total;
    }
  }
  return out;
}

std::vector<double> upper_concave_envelope(const std::vector<double>& u) {
  const auto n = static_cast<int64_t>(u.size());
  if (n <= 2) return u;
  // The upper hull of (i, u[i]) by the monotone chain: a vertex leaves while it lies on or below the
  // chord from its predecessor to the new point.
  std::vector<int64_t> hull;
  for (int64_t i = 0; i < n; ++i) {
    while (hull.size() >= 2) {
      const int64_t a = hull[hull.size() - 2], b = hull.back();
      const double cross = (static_cast<double>(b - a)) * (u[i] - u[a]) - (u[b] - u[a]) * static_cast<double>(i - a);
      if (cross < 0) break;  // b lies strictly above the chord a–i
      hull.pop_back();
    }
    hull.push_back(i);
  }
  std::vector<double> env(u.size());
  for (size_t v = 0; v + 1 < hull.size(); ++v) {
    const int64_t a = hull[v], b = hull[v + 1];
    for (int64_t i = a; i <= b; ++i)
      env[i] = u[a] + (u[b] - u[a]) * static_cast<double>(i - a) / static_cast<double>(b - a);
  }
  return env;
}

at::Tensor allocate_budget_units(const at::Tensor& utility, int64_t total_units) {
  const int64_t n = utility.size(0), grid = utility.size(1) - 1;
  KVC_CHECK(total_units >= 0 && total_units <= n * grid, "LU-KV: {} budget units for {} heads of {} units each",
            total_units, n, grid);
  return units_of_first(greedy_order(utility), n, total_units);
}

at::Tensor lukv_prune_curve(const at::Tensor& utility) {
  const int64_t n = utility.size(0), grid = utility.size(1) - 1;
  const std::vector<int64_t> order = greedy_order(utility);
  at::Tensor prune = at::empty({99, n}, at::kDouble);
  for (int64_t t = 1; t <= 99; ++t) {
    const int64_t units = std::llround((1.0 - static_cast<double>(t) / 100.0) * static_cast<double>(n * grid));
    prune[t - 1] = 1.0 - units_of_first(order, n, units).to(at::kDouble) / static_cast<double>(grid);
  }
  return prune;
}

std::vector<int64_t> lukv_head_keep(const at::Tensor& prune, int64_t length) {
  // float32 as kvpress' curve rows are.
  const at::Tensor ideal = (1.0 - prune.to(at::kFloat)).clamp(0.0, 1.0) * static_cast<float>(length);
  const auto kv = static_cast<int64_t>(ideal.numel());
  const auto* x = ideal.contiguous().data_ptr<float>();
  float sum = 0;
  for (int64_t h = 0; h < kv; ++h) sum += x[h];
  // torch.round: half to even, as std::nearbyint in the default rounding mode.
  const int64_t total = std::clamp<int64_t>(static_cast<int64_t>(std::nearbyint(sum)), kv, kv * length);
  std::vector<int64_t> keep(static_cast<size_t>(kv));
  int64_t given = 0;
  for (int64_t h = 0; h < kv; ++h) given += keep[h] = static_cast<int64_t>(std::floor(x[h]));
  if (total > given) {
    // The remainder to the largest fractional parts (the lower head on a tie).
    std::vector<int64_t> heads(static_cast<size_t>(kv));
    std::iota(heads.begin(), heads.end(), 0);
    std::stable_sort(heads.begin(), heads.end(),
                     [&](int64_t a, int64_t b) { return x[a] - std::floor(x[a]) > x[b] - std::floor(x[b]); });
    for (int64_t i = 0; i < std::min(total - given, kv); ++i) ++keep[heads[i]];
  }
  for (int64_t& k : keep) k = std::clamp<int64_t>(k, 1, length);
  return keep;
}

}  // namespace kvc
