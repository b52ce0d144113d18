#include "metrics/label_metrics.h"

#include <algorithm>

#include "metrics/python_unicode.h"
#include "util/error.h"
#include "util/utf8.h"

namespace kvc {

namespace {

// re.findall(r"\d+", text) with Python's Unicode \d: full-width or Arabic-Indic digits form numbers too,
// kept as written, so "１２" never equals "12".
std::vector<std::u32string> digit_runs(const std::u32string& text) {
  std::vector<std::u32string> runs;
  size_t i = 0;
  while (i < text.size()) {
    if (!python_unicode::is_decimal(text[i])) {
      ++i;
      continue;
    }
    const size_t start = i;
    while (i < text.size() && python_unicode::is_decimal(text[i])) ++i;
    runs.push_back(text.substr(start, i - start));
  }
  return runs;
}

// right_num / len(numbers), 0.0 when the prediction holds no number.
double fraction_equal(const std::string& prediction, const std::u32string& wanted) {
  const auto numbers = digit_runs(decode_utf8(prediction));
  if (numbers.empty()) return 0.0;
  return static_cast<double>(std::count(numbers.begin(), numbers.end(), wanted)) / numbers.size();
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A ground truth as it may appear in a one-line error message: line breaks shown as spaces, long ones cut.
std::string one_line_excerpt(const std::u32string& text) {
  constexpr size_t kMaxCharacters = 60;
  std::u32string excerpt = text.substr(0, kMaxCharacters);
  for (char32_t& c : excerpt) {
    if (c == U'\n' || c == U'\r' || python_unicode::is_space(c)) c = U' ';
  }
  return encode_utf8(excerpt) + (text.size() > kMaxCharacters ? "..." : "");
}

}  // namespace

double classification_score(const std::string& prediction, const std::string& ground_truth,
                            const std::vector<std::string>& all_classes) {
  std::vector<std::string> matched;
  for (const auto& name : all_classes) {
    if (contains(prediction, name)) matched.push_back(name);
  }
  // Python's list iterator keeps its index when an element is removed, so the next element is skipped;
  // list.remove() drops the first equal element, which with repeated class names may lie before it.
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
  // re.findall(r'Paragraph (\d+)', ground_truth)[0]: the first "Paragraph " followed by a digit.
  static const std::u32string kMarker = U"Paragraph ";
  const std::u32string truth = decode_utf8(ground_truth);
  for (size_t at = truth.find(kMarker); at != std::u32string::npos; at = truth.find(kMarker, at + 1)) {
    const size_t digits = at + kMarker.size();
    if (digits < truth.size() && python_unicode::is_decimal(truth[digits])) {
      return fraction_equal(prediction, digit_runs(truth.substr(digits)).front());
    }
  }
  // LongBench raises IndexError here: the data file is broken, not the prediction.
  fail("retrieval metric: ground truth '{}' names no 'Paragraph N'", one_line_excerpt(truth));
}

double count_score(const std::string& prediction, const std::string& ground_truth) {
  return fraction_equal(prediction, decode_utf8(ground_truth));
}

}  // namespace kvc
