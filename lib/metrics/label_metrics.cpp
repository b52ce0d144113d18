#include "metrics/label_metrics.h"

#include <algorithm>
#include <cctype>

#include "util/error.h"

namespace kvc {

namespace {

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// re.findall(r"\d+", text)
std::vector<std::string> digit_runs(const std::string& text) {
  std::vector<std::string> runs;
  size_t i = 0;
  while (i < text.size()) {
    if (!is_digit(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && is_digit(text[i])) ++i;
    runs.push_back(text.substr(start, i - start));
  }
  return runs;
}

double fraction_equal(const std::vector<std::string>& numbers, const std::string& wanted) {
  if (numbers.empty()) return 0.0;
  return static_cast<double>(std::count(numbers.begin(), numbers.end(), wanted)) / numbers.size();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

double classification_score(const std::string& prediction, const std::string& ground_truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matched;
  for (const auto& name : all_classes) {
    if (contains(prediction, name)) matched.push_back(name);
  }
  // Python's list iterator keeps its index when an element is removed, so the next element is skipped.
  for (size_t index = 0; index < matched.size(); ++index) {
    const std::string term = matched[index];
    if (contains(ground_truth, term) && term != ground_truth) {
      matched.erase(std::find(matched.begin(), matched.end(), term));
    }
  }
  if (std::find(matched.begin(), matched.end(), ground_truth) == matched.end()) return 0.0;
  return 1.0 / matched.size();
}

double retrieval_score(const std::string& prediction, const std::string& ground_truth) {
  static const std::string kMarker = "Paragraph ";
  for (size_t at = ground_truth.find(kMarker); at != std::string::npos; at = ground_truth.find(kMarker, at + 1)) {
    const size_t digits = at + kMarker.size();
    if (digits < ground_truth.size() && is_digit(ground_truth[digits])) {
      return fraction_equal(digit_runs(prediction), digit_runs(ground_truth.substr(digits)).front());
    }
  }
  fail("retrieval metric: ground truth '{}' names no 'Paragraph N'", ground_truth);
}

double count_score(const std::string& prediction, const std::string& ground_truth) {
  return fraction_equal(digit_runs(prediction), ground_truth);
}

}  // namespace kvc
