#include "metrics/qa_metrics.h"

#include <map>

#include "metrics/text_normalize.h"

namespace kvc {

double token_f1(const std::vector<std::string>& predicted, const std::vector<std::string>& expected) {
  std::map<std::string, int> unmatched_expected;
  for (const auto& token : expected) ++unmatched_expected[token];
  int common = 0;
  for (const auto& token : predicted) {
    auto it = unmatched_expected.find(token);
    if (it != unmatched_expected.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0.0;
  const double precision = static_cast<double>(common) / predicted.size();
  const double recall = static_cast<double>(common) / expected.size();
  return 2.0 * precision * recall / (precision + recall);
}

double qa_f1_score(const std::string& prediction, const std::string& ground_truth) {
  return token_f1(split_whitespace(normalize_answer(prediction)), split_whitespace(normalize_answer(ground_truth)));
}

double exact_match_score(const std::string& prediction, const std::string& ground_truth) {
  return normalize_answer(prediction) == normalize_answer(ground_truth) ? 1.0 : 0.0;
}

double contains_answer(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0.0;
  const std::string haystack = to_lower(prediction);
  size_t found = 0;
  for (const auto& reference : references) {
    if (haystack.find(to_lower(reference)) != std::string::npos) ++found;
  }
  return static_cast<double>(found) / references.size();
}

}  // namespace kvc
