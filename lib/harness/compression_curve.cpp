#include "harness/compression_curve.h"

#include <cmath>

namespace kvc {

std::optional<double> normalised_area(const std::vector<CurvePoint>& curve) {
  if (curve.size() < 2) return std::nullopt;
  double area = 0;
  for (size_t i = 1; i < curve.size(); ++i) {
    const double width = curve[i].ratio - curve[i - 1].ratio;
    if (!(width >= 0)) return std::nullopt;  // unsorted (or NaN)
    area += width * (curve[i].score + curve[i - 1].score) / 2;
  }
  const double span = curve.back().ratio - curve.front().ratio;
  if (!(span > 0)) return std::nullopt;
  return area / span;
}

std::optional<Achievable> achievable_compression(const std::vector<std::vector<CurvePoint>>& curves, double tolerance) {
  // The tasks that define a relative drop, all on the first one's ratios.
  std::vector<const std::vector<CurvePoint>*> tasks;
  for (const auto& c : curves) {
    if (c.empty() || c.front().ratio != 0 || !(c.front().score > 0)) continue;
    if (!tasks.empty() && c.size() != tasks.front()->size()) return std::nullopt;
    tasks.push_back(&c);
  }
  if (tasks.empty()) return std::nullopt;
  const std::vector<CurvePoint>& grid = *tasks.front();
  std::vector<double> drop(grid.size(), 0);
  for (size_t i = 0; i < grid.size(); ++i) {
    for (const auto* t : tasks) {
      if (std::abs((*t)[i].ratio - grid[i].ratio) > 1e-9) return std::nullopt;
      drop[i] += ((*t)[0].score - (*t)[i].score) / (*t)[0].score / static_cast<double>(tasks.size());
    }
  }
  for (size_t i = 1; i < grid.size(); ++i) {
    if (drop[i] <= tolerance) continue;
    // ε crosses the tolerance between ratios i − 1 (within) and i (beyond): where the line meets it.
    const double r0 = grid[i - 1].ratio, r1 = grid[i].ratio;
    const double t = (tolerance - drop[i - 1]) / (drop[i] - drop[i - 1]);
    return Achievable{r0 + t * (r1 - r0), false};
  }
  return Achievable{grid.back().ratio, true};
}

}  // namespace kvc
