#pragma once
// Fitting generated text to a token budget when only a token counter is at hand.
#include <functional>
#include <optional>
#include <string>

#include "tasks/task_sample.h"

namespace kvc {

// The largest n in [0, max_count] with counter(build(n)) <= budget, assuming token counts grow with n
// (search doubles n, then bisects: O(log n) calls of the counter); nullopt when build(0) is over budget.
std::optional<size_t> largest_fitting(size_t max_count, size_t budget, const TokenCounter& counter,
                                      const std::function<std::string(size_t)>& build);

// As largest_fitting, but throws kvc::Error "<what>: ..." saying how many tokens build(0) needs.
size_t fit_to_budget(const std::string& what, size_t max_count, size_t budget, const TokenCounter& counter,
                     const std::function<std::string(size_t)>& build);

}  // namespace kvc
