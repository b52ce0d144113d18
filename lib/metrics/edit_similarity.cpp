#include "metrics/edit_similarity.h"

#include <cmath>

#include "metrics/sequence_matcher.h"
#include "util/utf8.h"

namespace kvc {

namespace {

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

int fuzz_ratio(const std::string& a, const std::string& b) {
  // fuzzywuzzy's decorators run before the matcher: equal strings score 100, one empty side 0.
  if (a == b) return 100;
  if (a.empty() || b.empty()) return 0;
  // std::nearbyint rounds half to even in the default rounding mode, like Python's round().
  return static_cast<int>(std::nearbyint(100.0 * sequence_matcher_ratio(decode_utf8(a), decode_utf8(b))));
}

double code_sim_score(const std::string& prediction, const std::string& ground_truth) {
  return fuzz_ratio(first_code_line(prediction), ground_truth) / 100.0;
}

}  // namespace kvc
