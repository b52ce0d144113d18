// LongBench's 21 data sets against LongBench's own code: the table of prompts, lengths and metrics
// against its config files and eval.py (data/reference/longbench_config/, made by
// scripts/make_longbench_config_goldens.py), and whole prediction files against the scores its eval.py
// gives them (data/reference/longbench_eval/, made by scripts/make_longbench_eval_goldens.py). Also the
// reader's refusal of files that do not fit the data set they are run as.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/metric_registry.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "tasks/longbench.h"
#include "tasks/longbench_predictions.h"
#include "util/files.h"

namespace {

using kvc::test::expect_error;
using Json = nlohmann::json;

Json read_json(const std::string& path) { return Json::parse(kvc::read_text_file(path)); }

std::string write_lines(const std::string& name, const std::vector<std::string>& lines) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream out(path);
  for (const auto& line : lines) out << line << "\n";
  return path;
}

// eval.py's metric functions under kvc's metric names.
const std::map<std::string, std::string> kMetricNames = {{"qa_f1_score", "qa_f1"},
                                                         {"qa_f1_zh_score", "qa_f1_zh"},
                                                         {"rouge_score", "rouge_l"},
                                                         {"rouge_zh_score", "rouge_zh"},
                                                         {"classification_score", "classification"},
                                                         {"count_score", "count"},
                                                         {"retrieval_score", "retrieval"},
                                                         {"retrieval_zh_score", "retrieval_zh"},
                                                         {"code_sim_score", "code_sim"}};

TEST(LongBenchDatasets, TableIsLongBenchsOwnConfig) {
  const Json official = read_json(kvc::test::reference_dir("longbench_config") + "/datasets.json")["datasets"];
  std::vector<std::string> official_names;
  for (const auto& [name, config] : official.items()) {
    official_names.push_back(name);
    SCOPED_TRACE(name);
    const kvc::DatasetSpec& spec = kvc::dataset_spec(name);
    EXPECT_EQ(spec.prompt_template, config["prompt"].get<std::string>());
    EXPECT_EQ(spec.max_new_tokens, config["max_new_tokens"].get<int>());
    EXPECT_EQ(spec.metric, kMetricNames.at(config["metric"].get<std::string>()));
    EXPECT_EQ(spec.first_line_only, config["first_line_only"].get<bool>());
    kvc::check_metric_name(spec.metric);
  }
  std::vector<std::string> names = kvc::longbench_dataset_names();
  std::sort(names.begin(), names.end());  // the JSON reader sorts keys
  EXPECT_EQ(names, official_names);
  EXPECT_EQ(official_names.size(), 21u);
}

TEST(LongBenchDatasets, EveryPromptSplitsIntoContextAndQuestion) {
  kvc::TaskSample sample;
  sample.context = "CONTEXT {input} stays";  // braces inside the data are not placeholders
  sample.question = "QUESTION";
  for (const auto& name : kvc::longbench_dataset_names()) {
    const std::string& prompt = kvc::dataset_spec(name).prompt_template;
    const kvc::PromptParts parts = kvc::split_prompt(prompt, sample);
    // str.format(context=..., input=...) of the template, done by hand.
    std::string expected = prompt;
    expected.replace(expected.find("{context}"), 9, sample.context);
    const size_t input = expected.find("{input}", expected.find(sample.context) + sample.context.size());
    if (input != std::string::npos) expected.replace(input, 7, sample.question);
    EXPECT_EQ(parts.context_part + parts.question_part, expected) << name;
    EXPECT_EQ(parts.context_part.find("QUESTION"), std::string::npos) << name;
  }
}

// Scores a prediction file with kvc and compares with eval.py's: each line's metric value (to 1e-9) and
// that line scored alone by scorer() (rounded to 2 decimals of a percent), the file (scorer) and
// LongBench-E's buckets (scorer_e). Returns the lines compared; `max_difference` grows to the largest
// per-line difference seen.
double max_difference = 0;
size_t expect_scores_as_eval_py(const std::string& path, const std::string& dataset, const Json& expected) {
  SCOPED_TRACE(path);
  const kvc::DatasetSpec& spec = kvc::dataset_spec(dataset);
  const auto data = kvc::load_longbench_predictions(path, kvc::OnBadLine::Stop);
  EXPECT_EQ(data.samples.size(), expected["per_line"].size());
  if (data.samples.size() != expected["per_line"].size()) return 0;
  std::vector<double> scores;
  for (size_t i = 0; i < data.samples.size(); ++i) {
    scores.push_back(kvc::score_prediction(spec, data.predictions[i], data.samples[i]));
    const double difference = std::abs(scores.back() - expected["per_line_exact"][i].get<double>());
    max_difference = std::max(max_difference, difference);
    EXPECT_LE(difference, 1e-9) << "line " << i + 1 << ": '" << data.predictions[i] << "'";
    EXPECT_EQ(kvc::longbench_percent({scores.back()}), expected["per_line"][i].get<double>()) << "line " << i + 1;
  }
  EXPECT_EQ(kvc::longbench_percent(scores), expected["score"].get<double>());
  for (const auto& bucket : kvc::longbench_e_buckets(scores, data.records)) {
    const Json& want = expected["score_e"][bucket.name];
    if (want.is_null()) {
      EXPECT_TRUE(std::isnan(bucket.percent)) << bucket.name;  // the script writes numpy's NaN as null
    } else {
      EXPECT_EQ(bucket.percent, want.get<double>()) << bucket.name;
    }
  }
  return scores.size();
}

// Made-up predictions in every data set's answer form (right, partial, wrong, empty, multi-line, Unicode).
TEST(LongBenchDatasets, PredictionFilesScoreAsEvalPyScoresThem) {
  const std::string dir = kvc::test::reference_dir("longbench_eval");
  const Json golden = read_json(dir + "/scores.json")["scores"];
  size_t lines = 0;
  for (const auto& name : kvc::longbench_dataset_names()) {
    lines += expect_scores_as_eval_py(dir + "/pred/" + name + ".jsonl", name, golden.at(name));
  }
  EXPECT_GE(lines, 21u * 40u);
}

// A real model's predictions on LongBench itself (Llama-2-7B-chat-4k, as published with LongBench forks).
TEST(LongBenchDatasets, RealModelPredictionsScoreAsEvalPyScoresThem) {
  const std::string dir = kvc::test::reference_dir("longbench_eval");
  const Json golden = read_json(dir + "/scores.json");
  size_t lines = 0;
  for (const auto& [file, expected] : golden["real"].items()) {
    lines += expect_scores_as_eval_py(dir + "/" + golden["real_model"].get<std::string>() + "/" + file + ".jsonl",
                                      expected["dataset"].get<std::string>(), expected);
  }
  EXPECT_GE(lines, 4000u);
  std::printf("%zu real predictions compared, largest difference %.3g\n", lines, max_difference);
}

TEST(LongBenchDatasets, PercentRoundsAsPythonsRound) {
  // Values from Python: round(100 * 1/3, 2) = 33.33, round(100 * 2/3, 2) = 66.67.
  EXPECT_EQ(kvc::longbench_percent({1.0, 0.0, 0.0}), 33.33);
  EXPECT_EQ(kvc::longbench_percent({1.0, 1.0, 0.0}), 66.67);
  // 100 * 0.00125 is exactly 0.125, a tie: Python rounds it to even, 0.12 (not 0.13).
  EXPECT_EQ(kvc::longbench_percent({0.00125}), 0.12);
  // 100 * 0.02675 is 2.675, stored just below 2.675: Python's round gives 2.67; 1.005 likewise 1.0.
  EXPECT_EQ(kvc::longbench_percent({0.02675}), 2.67);
  EXPECT_EQ(kvc::longbench_percent({0.01005}), 1.0);
  EXPECT_TRUE(std::isnan(kvc::longbench_percent({})));  // numpy's mean of an empty bucket
}

TEST(LongBenchDatasets, BucketsNeedLengths) {
  kvc::LongBenchRecord with_length, without_length;
  with_length.length = 5000;
  without_length.line = 7;
  const auto buckets = kvc::longbench_e_buckets({1.0}, {with_length});
  ASSERT_EQ(buckets.size(), 3u);
  EXPECT_EQ(buckets[1].name, "4-8k");
  EXPECT_EQ(buckets[1].samples, 1u);
  EXPECT_EQ(buckets[1].percent, 100.0);
  EXPECT_TRUE(std::isnan(buckets[0].percent));
  expect_error([&] { kvc::longbench_e_buckets({1.0}, {without_length}); }, "line 7: no \"length\"");
}

TEST(LongBenchReader, RefusesAFileOfAnotherDataSet) {
  const std::string path =
      write_lines("hotpot_as_trec.jsonl",
                  {R"({"context":"c","input":"q","answers":["a"],"all_classes":["a"],"dataset":"hotpotqa"})"});
  // A wrong file is an error even when bad lines would be skipped.
  expect_error([&] { kvc::load_longbench_jsonl(path, kvc::OnBadLine::Skip, &kvc::dataset_spec("trec")); },
               "belongs to data set 'hotpotqa', not 'trec'");
  const std::string zh =
      write_lines("zh_as_en.jsonl", {R"({"context":"c","input":"q","answers":["a"],"language":"zh"})"});
  expect_error([&] { kvc::load_longbench_jsonl(zh, kvc::OnBadLine::Skip, &kvc::dataset_spec("multifieldqa_en")); },
               "language is 'zh'");
  // LongBench-E names its sets with "_e"; code sets name their programming language.
  const std::string e = write_lines(
      "hotpotqa_e.jsonl",
      {R"({"context":"c","input":"q","answers":["a"],"dataset":"hotpotqa_e","language":"en","length":4100})"});
  const auto data = kvc::load_longbench_jsonl(e, kvc::OnBadLine::Stop, &kvc::dataset_spec("hotpotqa"));
  ASSERT_EQ(data.records.size(), 1u);
  EXPECT_EQ(data.records[0].length, 4100);
  EXPECT_EQ(data.records[0].line, 1u);
  const std::string code =
      write_lines("lcc.jsonl", {R"({"context":"c","input":"","answers":["x"],"language":"java"})"});
  EXPECT_EQ(kvc::load_longbench_jsonl(code, kvc::OnBadLine::Stop, &kvc::dataset_spec("lcc")).samples.size(), 1u);
}

TEST(LongBenchReader, LinesThatCannotBeScoredAreBadLines) {
  const std::string path =
      write_lines("retrieval.jsonl", {R"({"context":"c","input":"q","answers":["Paragraph 12"]})",
                                      R"({"context":"c","input":"q","answers":["twelve"]})",
                                      R"({"context":"c","input":"q","answers":["Paragraph x, Paragraph 3"]})"});
  const auto& retrieval = kvc::dataset_spec("passage_retrieval_en");
  expect_error([&] { kvc::load_longbench_jsonl(path, kvc::OnBadLine::Stop, &retrieval); },
               "retrieval.jsonl:2: answer 'twelve' names no paragraph");
  const auto data = kvc::load_longbench_jsonl(path, kvc::OnBadLine::Skip, &retrieval);
  EXPECT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.skipped_lines, 1u);
  EXPECT_EQ(data.records[1].line, 3u);
  const std::string trec =
      write_lines("trec.jsonl", {R"({"context":"c","input":"q","answers":["Food"],"all_classes":null})"});
  expect_error([&] { kvc::load_longbench_jsonl(trec, kvc::OnBadLine::Stop, &kvc::dataset_spec("trec")); },
               "'all_classes' is missing or empty");
  // passage_count's answers may be integers; eval.py compares str() of them.
  const std::string count = write_lines("passage_count.jsonl", {R"({"context":"c","input":"","answers":[12]})"});
  const auto counted = kvc::load_longbench_jsonl(count, kvc::OnBadLine::Stop, &kvc::dataset_spec("passage_count"));
  EXPECT_EQ(counted.samples.at(0).answers, (std::vector<std::string>{"12"}));
}

TEST(LongBenchReader, TellsTheDataSetFromTheFile) {
  EXPECT_EQ(kvc::detect_longbench_dataset(write_lines("x.jsonl", {R"({"dataset":"qmsum","context":""})"})), "qmsum");
  EXPECT_EQ(kvc::detect_longbench_dataset(write_lines("x.jsonl", {R"({"dataset":"trec_e"})"})), "trec");
  EXPECT_EQ(kvc::detect_longbench_dataset(write_lines("repobench-p_e.jsonl", {R"({"pred":"x"})"})), "repobench-p");
  EXPECT_EQ(kvc::detect_longbench_dataset(write_lines("passage_retrieval_en.jsonl", {"{}"})), "passage_retrieval_en");
  expect_error([] { kvc::detect_longbench_dataset(write_lines("mystery.jsonl", {"{}"})); }, "pass --dataset");
}

TEST(LongBenchPredictions, ScoresEveryLineWithTheLastLinesClassesAsEvalPyDoes) {
  const std::string path = write_lines(
      "trec.jsonl", {R"({"pred":"Food","answers":["Food"],"all_classes":["Color"],"length":10})",
                     R"({"pred":"Color","answers":["Color"],"all_classes":["Food","Color"],"length":9000})", ""});
  const auto data = kvc::load_longbench_predictions(path, kvc::OnBadLine::Stop);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.samples[0].all_classes, (std::vector<std::string>{"Food", "Color"}));
  EXPECT_EQ(kvc::score_prediction(kvc::dataset_spec("trec"), data.predictions[0], data.samples[0]), 1.0);
  EXPECT_EQ(data.records[1].length, 9000);
  // What kvc-eval longbench writes reads back the same.
  const std::string line = kvc::longbench_prediction_line("Food\nmore", data.samples[0], data.records[0]);
  const Json parsed = Json::parse(line);
  EXPECT_EQ(parsed["pred"], "Food\nmore");
  EXPECT_EQ(parsed["length"], 10);
  const std::string bad = write_lines("bad.jsonl", {R"({"pred":1,"answers":["a"]})"});
  expect_error([&] { kvc::load_longbench_predictions(bad, kvc::OnBadLine::Stop); }, "bad.jsonl:1: 'pred'");
}

}  // namespace
