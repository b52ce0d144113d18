#pragma once
// The median of a benchmark's repeats (the upper middle one of an even count): one run slowed or sped up by
// the machine moves it less than it moves a mean or a best-of.
#include <algorithm>
#include <vector>

namespace kvc {

inline double median_of(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2), values.end());
  return values[values.size() / 2];
}

}  // namespace kvc
