// kvc's LongBench metrics against LongBench's own scorer: every case of
// data/reference/longbench_scorer/cases.jsonl must get the score that the official metrics.py gave it
// (official_scores.json, made by scripts/longbench_official_scores.py) to within 1e-9, and where the
// official function raised, kvc must throw a one-line kvc::Error. The per-data-set totals of
// datasets.jsonl are compared with eval.py's round(100 * mean, 2) through kvc's own scoring path.
// The Chinese metrics are compared when they are registered and jieba's dictionary loads; otherwise
// their cases are skipped, with a note.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/metric_registry.h"
#include "tasks/longbench.h"
#include "util/error.h"

namespace {

using nlohmann::json;

const std::string kGoldenDir = std::string(KVC_SOURCE_DIR) + "/data/reference/longbench_scorer";
constexpr double kTolerance = 1e-9;

const std::map<std::string, std::string> kOfficialToKvc = {
    {"qa_f1_score", "qa_f1"},         {"rouge_score", "rouge_l"},     {"classification_score", "classification"},
    {"retrieval_score", "retrieval"}, {"count_score", "count"},       {"code_sim_score", "code_sim"},
    {"qa_f1_zh_score", "qa_f1_zh"},   {"rouge_zh_score", "rouge_zh"}, {"retrieval_zh_score", "retrieval_zh"},
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> rows;
  std::istringstream lines(slurp(path));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) rows.push_back(json::parse(line));
  }
  return rows;
}

// Why kvc cannot score a Chinese metric here, or "": they come with jieba's dictionary, which a machine
// may lack, and with their own engineer's registration. Every other metric must be registered.
std::string unavailable_reason(const std::string& metric) {
  const bool chinese = metric.size() > 3 && metric.compare(metric.size() - 3, 3, "_zh") == 0;
  if (!chinese) return "";
  const auto& names = kvc::metric_names();
  if (std::find(names.begin(), names.end(), metric) == names.end()) return "not registered in metric_registry";
  try {
    kvc::score_with_metric(metric, "段落1", {"段落1"});
  } catch (const kvc::Error& error) {
    return error.what();
  }
  return "";
}

struct Outcome {
  bool raised = false;
  std::string message;
  double score = 0;
};

Outcome kvc_score(const std::string& metric, const std::string& prediction, const std::string& ground_truth,
                  const std::vector<std::string>& all_classes) {
  try {
    return {false, "", kvc::score_with_metric(metric, prediction, {ground_truth}, all_classes)};
  } catch (const kvc::Error& error) {
    return {true, error.what(), 0};
  }
}

struct MetricSummary {
  size_t compared = 0, official_raised = 0, failed = 0, skipped = 0;
  double max_difference = 0;
  std::string skip_reason;
};

TEST(LongBenchScorer, EveryCaseMatchesTheOfficialScorer) {
  const auto cases = read_jsonl(kGoldenDir + "/cases.jsonl");
  const json class_lists = json::parse(slurp(kGoldenDir + "/class_lists.json"));
  const json golden = json::parse(slurp(kGoldenDir + "/official_scores.json"));
  const json& results = golden.at("results");
  ASSERT_EQ(results.size(), cases.size())
      << "official_scores.json is stale: rerun scripts/longbench_official_scores.py";
  ASSERT_GT(cases.size(), 1000u);

  std::map<std::string, MetricSummary> summaries;
  std::map<std::string, std::string> unavailable;
  for (const auto& [official, metric] : kOfficialToKvc) unavailable[metric] = unavailable_reason(metric);

  for (size_t i = 0; i < cases.size(); ++i) {
    const json& row = cases[i];
    const std::string id = row.at("id");
    const std::string metric = kOfficialToKvc.at(row.at("metric").get<std::string>());
    MetricSummary& summary = summaries[metric];
    if (!unavailable[metric].empty()) {
      ++summary.skipped;
      summary.skip_reason = unavailable[metric];
      continue;
    }
    std::vector<std::string> all_classes;
    if (row.contains("class_list")) all_classes = class_lists.at(row.at("class_list").get<std::string>());
    const std::string prediction = row.at("prediction"), ground_truth = row.at("ground_truth");
    const Outcome outcome = kvc_score(metric, prediction, ground_truth, all_classes);
    const json& official = results[i];
    ++summary.compared;
    if (official.is_object()) {
      ++summary.official_raised;
      const bool one_line = outcome.message.find('\n') == std::string::npos;
      if (!outcome.raised || !one_line) ++summary.failed;
      EXPECT_TRUE(outcome.raised) << id << ": LongBench raised " << official.at("raised") << ", kvc scored "
                                  << outcome.score;
      EXPECT_TRUE(one_line) << id << ": the error should be one line: " << outcome.message;
      continue;
    }
    if (outcome.raised) {
      ++summary.failed;
      ADD_FAILURE() << id << ": kvc threw '" << outcome.message << "', LongBench scored " << official;
      continue;
    }
    const double difference = std::abs(outcome.score - official.get<double>());
    summary.max_difference = std::max(summary.max_difference, difference);
    if (difference > kTolerance) ++summary.failed;
    EXPECT_LE(difference, kTolerance) << id << ": kvc " << outcome.score << ", LongBench " << official
                                      << "\n  prediction: " << json(prediction)
                                      << "\n  ground truth: " << json(ground_truth);
  }

  std::cout << "metric           compared  max |difference|  official raised  failed\n";
  for (const auto& [metric, s] : summaries) {
    std::cout << fmt::format("{:<16} {:>8}  {:>16.3g}  {:>15}  {:>6}", metric, s.compared, s.max_difference,
                             s.official_raised, s.failed);
    if (s.skipped > 0) std::cout << fmt::format("  ({} skipped: {})", s.skipped, s.skip_reason);
    std::cout << "\n";
  }
}

TEST(LongBenchScorer, DataSetTotalsMatchEvalPy) {
  const json golden = json::parse(slurp(kGoldenDir + "/official_scores.json"));
  std::map<std::string, std::vector<json>> by_dataset;
  for (const json& record : read_jsonl(kGoldenDir + "/datasets.jsonl"))
    by_dataset[record.at("dataset")].push_back(record);
  size_t compared = 0;
  for (const json& expected : golden.at("datasets")) {
    const std::string name = expected.at("dataset");
    const kvc::DatasetSpec& spec = kvc::dataset_spec(name);
    if (!unavailable_reason(spec.metric).empty()) {
      std::cout << name << ": skipped (" << spec.metric << ": " << unavailable_reason(spec.metric) << ")\n";
      continue;
    }
    const auto& records = by_dataset.at(name);
    ASSERT_EQ(records.size(), expected.at("samples").get<size_t>()) << name;
    std::vector<double> scores;
    for (const json& record : records) {
      kvc::TaskSample sample;
      sample.answers = record.at("answers").get<std::vector<std::string>>();
      // eval.py scores every line of a file with the class list of its last line.
      if (!records.back().at("all_classes").is_null()) sample.all_classes = records.back().at("all_classes");
      scores.push_back(kvc::score_prediction(spec, record.at("pred"), sample));
    }
    EXPECT_NEAR(kvc::longbench_percent(scores), expected.at("total").get<double>(), kTolerance) << name;
    ++compared;
  }
  std::cout << compared << " of " << golden.at("datasets").size() << " data set totals compared\n";
  EXPECT_GE(compared, 16u);
}

}  // namespace
