#pragma once
// Pieces shared by the synthetic task generators (internal to lib/tasks).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_sample.h"

namespace kvc {

// Sample fields every generator sets the same way.
inline TaskSample synthetic_sample(const std::string& task, size_t context_tokens, uint64_t seed) {
  TaskSample sample;
  sample.id = fmt::format("{}-{}tok-seed{}", task, context_tokens, seed);
  sample.metric = "contains";
  return sample;
}

// "a", "a and b", "a, b, and c".
inline std::string join_with_and(const std::vector<std::string>& items) {
  if (items.size() <= 2) return fmt::format("{}", fmt::join(items, " and "));
  const std::vector<std::string> head(items.begin(), items.end() - 1);
  return fmt::format("{}, and {}", fmt::join(head, ", "), items.back());
}

}  // namespace kvc
