#include "metrics/edit_similarity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "util/utf8.h"

namespace kvc {

namespace {

size_t longest_common_subsequence(const std::u32string& a, const std::u32string& b) {
  std::vector<size_t> previous(b.size() + 1, 0), current(b.size() + 1, 0);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      current[j] = a[i - 1] == b[j - 1] ? previous[j - 1] + 1 : std::max(previous[j], current[j - 1]);
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

// LongBench skips lines that look like markdown fences or comments anywhere in the line, not only at
// its start.
std::string first_code_line(const std::string& prediction) {
  const size_t begin = prediction.find_first_not_of('\n');
  if (begin == std::string::npos) return "";
  size_t start = begin;
  while (start <= prediction.size()) {
    size_t end = prediction.find('\n', start);
    if (end == std::string::npos) end = prediction.size();
    const std::string line = prediction.substr(start, end - start);
    const bool skipped = line.find('`') != std::string::npos || line.find('#') != std::string::npos ||
                         line.find("//") != std::string::npos;
    if (!skipped) return line;
    start = end + 1;
  }
  return "";
}

}  // namespace

double edit_similarity(const std::string& a, const std::string& b) {
  const std::u32string left = decode_utf8(a), right = decode_utf8(b);
  const size_t total = left.size() + right.size();
  if (total == 0) return 1.0;
  return 2.0 * static_cast<double>(longest_common_subsequence(left, right)) / static_cast<double>(total);
}

double code_sim_score(const std::string& prediction, const std::string& ground_truth) {
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
  return std::nearbyint(100.0 * edit_similarity(first_code_line(prediction), ground_truth)) / 100.0;
}

}  // namespace kvc
