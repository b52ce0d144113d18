#include "metrics/metric_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "metrics/edit_similarity.h"
#include "metrics/label_metrics.h"
#include "metrics/qa_metrics.h"
#include "metrics/rouge.h"
#include "metrics/ruler_metrics.h"
#include "metrics/zh_metrics.h"
#include "util/error.h"

namespace kvc {

namespace {

using PairMetric = double (*)(const std::string& prediction, const std::string& answer,
                              const std::vector<std::string>& all_classes);

using AllAnswersMetric = double (*)(const std::string& prediction, const std::vector<std::string>& answers);

struct NamedMetric {
  const char* name;
  PairMetric score;                      // null for "contains", which scores all answers together
  AllAnswersMetric score_all = nullptr;  // set for metrics that score all answers together
};

const std::vector<NamedMetric>& registry() {
  static const std::vector<NamedMetric> metrics = {
      {"qa_f1", [](const auto& p, const auto& a, const auto&) { return qa_f1_score(p, a); }},
      {"rouge_l", [](const auto& p, const auto& a, const auto&) { return rouge_l_score(p, a); }},
      {"classification", [](const auto& p, const auto& a, const auto& c) { return classification_score(p, a, c); }},
      {"code_sim", [](const auto& p, const auto& a, const auto&) { return code_sim_score(p, a); }},
      {"exact_match", [](const auto& p, const auto& a, const auto&) { return exact_match_score(p, a); }},
      {"retrieval", [](const auto& p, const auto& a, const auto&) { return retrieval_score(p, a); }},
      {"count", [](const auto& p, const auto& a, const auto&) { return count_score(p, a); }},
      {"qa_f1_zh", [](const auto& p, const auto& a, const auto&) { return qa_f1_zh_score(p, a); }},
      {"rouge_zh", [](const auto& p, const auto& a, const auto&) { return rouge_zh_score(p, a); }},
      {"retrieval_zh", [](const auto& p, const auto& a, const auto&) { return retrieval_zh_score(p, a); }},
      {"contains", nullptr},
      {"string_match_all", nullptr, ruler_string_match_all},
      {"string_match_part", nullptr, ruler_string_match_part},
  };
  return metrics;
}

const NamedMetric& find_metric(const std::string& name) {
  const auto& metrics = registry();
  auto it = std::find_if(metrics.begin(), metrics.end(), [&](const NamedMetric& m) { return name == m.name; });
  KVC_CHECK(it != metrics.end(), "unknown metric '{}' (valid: {})", name, fmt::join(metric_names(), ", "));
  return *it;
}

}  // namespace

const std::vector<std::string>& metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& metric : registry()) out.emplace_back(metric.name);
    return out;
  }();
  return names;
}

void check_metric_name(const std::string& name) { find_metric(name); }

double score_with_metric(const std::string& name, const std::string& prediction,
                         const std::vector<std::string>& answers, const std::vector<std::string>& all_classes) {
  const NamedMetric& metric = find_metric(name);
  if (metric.score_all != nullptr) return metric.score_all(prediction, answers);
  if (metric.score == nullptr) return contains_answer(prediction, answers);
  double best = 0.0;
  for (const auto& answer : answers) best = std::max(best, metric.score(prediction, answer, all_classes));
  return best;
}

}  // namespace kvc
