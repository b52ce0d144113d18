#include "tasks/token_budget.h"

#include <algorithm>

#include "util/error.h"

namespace kvc {

std::optional<size_t> largest_fitting(size_t max_count, size_t budget, const TokenCounter& counter,
                                      const std::function<std::string(size_t)>& build) {
  const auto fits = [&](size_t n) { return counter(build(n)) <= budget; };
  if (!fits(0)) return std::nullopt;
  size_t fitting = 0, too_many = 0;
  for (size_t step = 1;; step *= 2) {
    const size_t probe = std::min(max_count, fitting + step);
    if (probe == fitting) return fitting;
    if (!fits(probe)) {
      too_many = probe;
      break;
    }
    fitting = probe;
  }
  while (too_many - fitting > 1) {
    const size_t middle = fitting + (too_many - fitting) / 2;
    (fits(middle) ? fitting : too_many) = middle;
  }
  return fitting;
}

size_t fit_to_budget(const std::string& what, size_t max_count, size_t budget, const TokenCounter& counter,
                     const std::function<std::string(size_t)>& build) {
  const auto count = largest_fitting(max_count, budget, counter, build);
  KVC_CHECK(count.has_value(), "{}: a context of {} tokens is too small; the shortest one takes {} tokens", what,
            budget, counter(build(0)));
  return *count;
}

}  // namespace kvc
