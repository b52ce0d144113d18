#include "metrics/ruler_metrics.h"

#include <cstdio>
#include <cstdlib>

#include "metrics/python_unicode.h"
#include "util/error.h"
#include "util/utf8.h"

namespace kvc {

namespace {

// str.strip() with no argument.
std::u32string python_strip(const std::u32string& text) {
  size_t begin = 0, end = text.size();
  while (begin < end && python_unicode::is_space(text[begin])) ++begin;
  while (end > begin && python_unicode::is_space(text[end - 1])) --end;
  return text.substr(begin, end - begin);
}

std::u32string lowered_prediction(const std::string& prediction) {
  return python_unicode::lower(decode_utf8(ruler_postprocess_prediction(prediction)));
}

bool found_in(const std::u32string& lowered, const std::string& reference) {
  return lowered.find(python_unicode::lower(decode_utf8(utf8_lossy(reference)))) != std::u32string::npos;
}

// Python's round(x, 2): the decimal nearest to the double's exact value, ties to even; glibc's printf
// rounds the exact binary value the same way.
double round_to_hundredths(double x) {
  char text[64];
  std::snprintf(text, sizeof text, "%.2f", x);
  return std::strtod(text, nullptr);
}

}  // namespace

std::string ruler_postprocess_prediction(const std::string& prediction) {
  std::u32string text = python_strip(decode_utf8(utf8_lossy(prediction)));
  for (char32_t& c : text) {
    if (c <= 0x1F) c = U'\n';
  }
  return encode_utf8(python_strip(text));
}

double ruler_string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  if (references.empty()) return 0.0;
  const std::u32string lowered = lowered_prediction(prediction);
  double found = 0.0;
  for (const auto& reference : references) found += found_in(lowered, reference) ? 1.0 : 0.0;
  return found / static_cast<double>(references.size());
}

double ruler_string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  const std::u32string lowered = lowered_prediction(prediction);
  for (const auto& reference : references) {
    if (found_in(lowered, reference)) return 1.0;
  }
  return 0.0;
}

double ruler_task_score(const std::string& metric, const std::vector<std::string>& predictions,
                        const std::vector<std::vector<std::string>>& references) {
  KVC_CHECK(metric == "string_match_all" || metric == "string_match_part",
            "unknown RULER metric '{}' (valid: string_match_all, string_match_part)", metric);
  KVC_CHECK(!predictions.empty() && predictions.size() == references.size(),
            "RULER score: {} predictions for {} reference lists", predictions.size(), references.size());
  const auto score = metric == "string_match_all" ? ruler_string_match_all : ruler_string_match_part;
  double sum = 0.0;  // summed in sample order, as Python's sum() does
  for (size_t i = 0; i < predictions.size(); ++i) sum += score(predictions[i], references[i]);
  return round_to_hundredths(sum / static_cast<double>(predictions.size()) * 100.0);
}

}  // namespace kvc
