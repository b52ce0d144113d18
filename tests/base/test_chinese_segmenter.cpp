// The C++ jieba port and LongBench's Chinese metrics against Python: goldens written by
// scripts/make_jieba_goldens.py with jieba 0.42.1 and LongBench's metrics.py, plus hand-checked cases.
// Needs jieba's data (python3-jieba, or KVC_JIEBA_DIR); without it the tests skip and say why.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/chinese_segmenter.h"
#include "metrics/metric_registry.h"
#include "metrics/zh_metrics.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace {

using Tokens = std::vector<std::string>;
const std::string kGoldenDir = std::string(KVC_SOURCE_DIR) + "/data/reference/jieba";

// A clone without python3-jieba skips these tests, with the error a user would see.
std::string missing_jieba_reason() {
  try {
    kvc::jieba_data_dir();
  } catch (const kvc::Error& e) {
    return e.what();
  }
  return "";
}

#define SKIP_WITHOUT_JIEBA() \
  if (!kvc::jieba_data_available()) GTEST_SKIP() << missing_jieba_reason()

nlohmann::json read_golden(const std::string& name) {
  return nlohmann::json::parse(kvc::read_text_file(kGoldenDir + "/" + name));
}

// The golden tokens: consecutive slices of the text, `lengths` code points each.
Tokens slice(const std::string& text, const nlohmann::json& lengths) {
  const std::u32string code_points = kvc::decode_utf8(text);
  Tokens tokens;
  size_t at = 0;
  for (const auto& length : lengths) {
    tokens.push_back(kvc::encode_utf8(code_points.substr(at, length.get<size_t>())));
    at += length.get<size_t>();
  }
  EXPECT_EQ(at, code_points.size()) << "golden token lengths do not cover: " << text;
  return tokens;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_) : setenv(name_, old_.c_str(), 1); }

 private:
  const char* name_;
  std::string old_;
};

std::string make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "kvc_jieba_XXXXXX").string();
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

// A jieba folder with the given dict.txt and tiny HMM tables (all characters unknown to the HMM).
std::string write_jieba_dir(const std::string& dictionary,
                            const std::string& emission = "P={'B': {}, 'E': {}, 'M': {}, 'S': {}}\n") {
  const std::string dir = make_temp_dir();
  std::filesystem::create_directory(dir + "/finalseg");
  kvc::write_file_atomic(dir + "/dict.txt", dictionary);
  kvc::write_file_atomic(dir + "/finalseg/prob_start.py",
                         "P={'B': -0.26, 'E': -3.14e+100, 'M': -3.14e+100, 'S': -1.46}\n");
  kvc::write_file_atomic(dir + "/finalseg/prob_trans.py",
                         "P={'B': {'E': -0.51, 'M': -0.91},\n 'E': {'B': -0.58, 'S': -0.80},\n"
                         " 'M': {'E': -0.33, 'M': -1.26},\n 'S': {'B': -0.72, 'S': -0.66}}\n");
  kvc::write_file_atomic(dir + "/finalseg/prob_emit.py", "from __future__ import unicode_literals\n\n" + emission);
  return dir;
}

std::string load_error(const std::string& dir) {
  try {
    kvc::ChineseSegmenter::load(dir);
  } catch (const kvc::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChineseSegmenter, MatchesJiebaOnEveryGoldenText) {
  SKIP_WITHOUT_JIEBA();
  const auto golden = read_golden("segmentation.json");
  ASSERT_EQ(golden["metadata"]["jieba_version"], "0.42.1");
  size_t mismatches = 0;
  for (const auto& item : golden["cases"]) {
    const std::string text = item["text"];
    const Tokens expected = slice(text, item["token_lengths"]);
    const Tokens actual = kvc::jieba_cut(text);
    if (actual != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "text: " << nlohmann::json(text).dump() << "\n  jieba: " << nlohmann::json(expected).dump()
                    << "\n  kvc:   " << nlohmann::json(actual).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "of " << golden["cases"].size() << " texts";
  EXPECT_GT(golden["cases"].size(), 1000u);
}

TEST(ChineseMetrics, MatchLongBenchOnEveryGoldenPair) {
  SKIP_WITHOUT_JIEBA();
  const auto cases = read_golden("segmentation.json")["cases"];
  const auto golden = read_golden("metrics.json");
  for (const auto& pair : golden["pairs"]) {
    const std::string prediction = cases[pair["prediction"].get<size_t>()]["text"];
    const std::string truth = cases[pair["ground_truth"].get<size_t>()]["text"];
    const std::string context =
        "prediction " + pair["prediction"].dump() + ", ground truth " + pair["ground_truth"].dump();
    EXPECT_NEAR(kvc::qa_f1_zh_score(prediction, truth), pair["qa_f1_zh"].get<double>(), 1e-9) << context;
    EXPECT_NEAR(kvc::rouge_zh_score(prediction, truth), pair["rouge_zh"].get<double>(), 1e-9) << context;
  }
  for (const auto& pair : golden["retrieval_pairs"]) {
    EXPECT_NEAR(kvc::retrieval_zh_score(pair["prediction"], pair["ground_truth"]), pair["retrieval_zh"].get<double>(),
                1e-9)
        << pair.dump();
  }
  // Ground truths on which LongBench raises IndexError: no "段落" followed by a digit.
  for (const auto& truth : golden["metadata"]["retrieval_failing_ground_truths"]) {
    EXPECT_THROW(kvc::retrieval_zh_score("段落3", truth), kvc::Error) << truth;
  }
  EXPECT_GT(golden["pairs"].size(), 500u);
}

TEST(ChineseSegmenter, HandCheckedSentences) {
  SKIP_WITHOUT_JIEBA();
  // jieba's own README examples: dictionary words, and "杭研", which is not in the dictionary, found by
  // the HMM from the single characters the dictionary route leaves.
  EXPECT_EQ(kvc::jieba_cut("我来到北京清华大学"), (Tokens{"我", "来到", "北京", "清华大学"}));
  EXPECT_EQ(kvc::jieba_cut("他来到了网易杭研大厦"), (Tokens{"他", "来到", "了", "网易", "杭研", "大厦"}));
  // Decimals and percentages stay whole (the HMM's letter/digit pattern); "C++" is a dictionary word.
  EXPECT_EQ(kvc::jieba_cut("3.14%和C++"), (Tokens{"3.14%", "和", "C++"}));
  // Outside the dictionary's character class every character is its own token, except "\r\n".
  EXPECT_EQ(kvc::jieba_cut("中文\r\n\n英文  １２"), (Tokens{"中文", "\r\n", "\n", "英文", " ", " ", "１", "２"}));
  // "-" is in the class but no word joins it, so "Wi-Fi" splits around it.
  EXPECT_EQ(kvc::jieba_cut("Wi-Fi 6"), (Tokens{"Wi", "-", "Fi", " ", "6"}));
  EXPECT_EQ(kvc::jieba_cut(""), Tokens{});
}

TEST(ChineseSegmenter, EqualScoresGoToTheLongerWord) {
  // total = 4 + 4 + 1 + 7 = 16, so "a"+"b" scores 2·log(4/16) = log(1/16), exactly the score of "ab":
  // jieba's max over (score, end) tuples then takes the larger end, "ab". Python confirms ['ab'].
  const std::string dir = write_jieba_dir("a 4\nb 4\nab 1\nz 7\n");
  EXPECT_EQ(kvc::ChineseSegmenter::load(dir).cut("ab"), (Tokens{"ab"}));
  // A repeated word counts in the total every time: 4 + 4 + 1 + 1 + 6 = 16 gives the same tie.
  const std::string repeated = write_jieba_dir("a 4\nb 4\nab 1\nab 1\nz 6\n");
  EXPECT_EQ(kvc::ChineseSegmenter::load(repeated).cut("ab"), (Tokens{"ab"}));
  // ...but keeps its last frequency: total 26, P(a)P(b) = 100/676 > P(ab) = 1/26 (with the first, 5/26,
  // "ab" would win). The two single characters together form a dictionary word, so they stay single
  // rather than going to the HMM. Python gives the same three results.
  const std::string last = write_jieba_dir("a 10\nb 10\nab 5\nab 1\n");
  EXPECT_EQ(kvc::ChineseSegmenter::load(last).cut("ab"), (Tokens{"a", "b"}));
  for (const auto& folder : {dir, repeated, last}) std::filesystem::remove_all(folder);
}

TEST(ChineseSegmenter, MalformedDataNamesFileAndLine) {
  const std::string bad_dictionary = write_jieba_dir("a 4\nb four\n");
  EXPECT_NE(load_error(bad_dictionary).find("dict.txt:2:"), std::string::npos) << load_error(bad_dictionary);
  const std::string bad_emission = write_jieba_dir("a 4\n", "P={'B': {'\\u4e00': -3.6,\n 'x' -1}}\n");
  EXPECT_NE(load_error(bad_emission).find("prob_emit.py:4:"), std::string::npos) << load_error(bad_emission);
  std::filesystem::remove_all(bad_dictionary);
  std::filesystem::remove_all(bad_emission);
}

TEST(ChineseSegmenter, MissingDataSaysHowToInstallIt) {
  ScopedEnv env("KVC_JIEBA_DIR", "/nonexistent/jieba");
  try {
    kvc::jieba_data_dir();
    FAIL() << "expected kvc::Error";
  } catch (const kvc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("python3-jieba"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("/nonexistent/jieba"), std::string::npos) << e.what();
  }
}

TEST(ChineseMetrics, HandChecked) {
  // lower() maps full-width "Ａ" to "ａ"; "，", "！" and "?" are punctuation; U+3000 is whitespace.
  EXPECT_EQ(kvc::normalize_zh_answer("Ａ，B\u3000c！?"), "ａbc");
  SKIP_WITHOUT_JIEBA();
  // Words 我/来到/北京/清华大学 against 北京/清华大学: 2 common, P = 2/4, R = 1, F1 = 2·0.5·1/1.5 = 2/3.
  EXPECT_NEAR(kvc::qa_f1_zh_score("我来到北京清华大学", "北京清华大学"), 2.0 / 3.0, 1e-12);
  // Punctuation-only words vanish after normalising, so "。" costs nothing.
  EXPECT_NEAR(kvc::qa_f1_zh_score("北京。", "北京"), 1.0, 1e-12);
  // Full-width "１２" is a number of its own (Python's \d), different from "12": 1 of 2 numbers match.
  EXPECT_DOUBLE_EQ(kvc::retrieval_zh_score("段落3和段落１２", "段落１２"), 0.5);
  EXPECT_DOUBLE_EQ(kvc::retrieval_zh_score("答案是段落12", "段落 3，段落12"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::retrieval_zh_score("没有数字", "段落12"), 0.0);
  EXPECT_THROW(kvc::retrieval_zh_score("1", "第3段"), kvc::Error);
  // Rouge-L on jieba words: "我 来到 北京" against "我 来到 北京 清华大学": LCS 3, P = 1, R = 3/4,
  // F = 2·0.75/(1.75 + 1e-8).
  EXPECT_NEAR(kvc::rouge_zh_score("我来到北京", "我来到北京清华大学"), 1.5 / (1.75 + 1e-8), 1e-12);
  EXPECT_NEAR(kvc::score_with_metric("qa_f1_zh", "北京", {"上海", "北京"}), 1.0, 1e-12);
}

}  // namespace
