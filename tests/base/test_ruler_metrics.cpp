// RULER's scorers against RULER's own code: data/reference/ruler_scorer/official_scores.json holds
// predictions (adversarial Unicode, case, whitespace, control characters, empty and long texts, and
// realistic answers) scored by RULER's constants.py after evaluate.py's postprocess_pred
// (scripts/ruler_official_scores.py).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "metrics/metric_registry.h"
#include "metrics/python_unicode.h"
#include "metrics/qa_metrics.h"
#include "metrics/ruler_metrics.h"
#include "util/utf8.h"

namespace {

using Json = nlohmann::json;

const Json& official() {
  static const Json scores = [] {
    std::ifstream in(std::string(KVC_SOURCE_DIR) + "/data/reference/ruler_scorer/official_scores.json");
    EXPECT_TRUE(in.good()) << "official_scores.json is missing";
    return Json::parse(in);
  }();
  return scores;
}

std::vector<std::string> references_of(const Json& c) { return c.at("references").get<std::vector<std::string>>(); }

TEST(RulerMetrics, PostprocessMatchesEvaluatePy) {
  for (const auto& c : official().at("cases")) {
    const std::string prediction = c.at("prediction");
    const std::string expected = c.value("postprocessed", prediction);
    ASSERT_EQ(kvc::ruler_postprocess_prediction(prediction), expected) << c.dump();
  }
}

TEST(RulerMetrics, PerSampleScoresMatchTheOfficialOnes) {
  const auto& cases = official().at("cases");
  ASSERT_GE(cases.size(), 2000u);
  double max_difference = 0;
  for (const auto& c : cases) {
    const std::string prediction = c.at("prediction");
    const auto references = references_of(c);
    const double all = 100 * kvc::ruler_string_match_all(prediction, references);
    const double part = 100 * kvc::ruler_string_match_part(prediction, references);
    max_difference = std::max({max_difference, std::abs(all - c.at("string_match_all").get<double>()),
                               std::abs(part - c.at("string_match_part").get<double>())});
    ASSERT_NEAR(all, c.at("string_match_all").get<double>(), 1e-9) << c.dump();
    ASSERT_NEAR(part, c.at("string_match_part").get<double>(), 1e-9) << c.dump();
    // The registry's names reach the same functions.
    ASSERT_EQ(kvc::score_with_metric("string_match_all", prediction, references),
              kvc::ruler_string_match_all(prediction, references));
    ASSERT_EQ(kvc::score_with_metric("string_match_part", prediction, references),
              kvc::ruler_string_match_part(prediction, references));
  }
  RecordProperty("max_difference", std::to_string(max_difference));
}

TEST(RulerMetrics, TaskScoresMatchEvaluatePyRounding) {
  const auto& cases = official().at("cases");
  for (const auto& group : official().at("groups")) {
    std::vector<std::string> predictions;
    std::vector<std::vector<std::string>> references;
    const size_t first = group.at("first"), count = group.at("count");
    for (size_t i = first; i < first + count; ++i) {
      predictions.push_back(cases[i].at("prediction"));
      references.push_back(references_of(cases[i]));
    }
    for (const char* metric : {"string_match_all", "string_match_part"}) {
      EXPECT_NEAR(kvc::ruler_task_score(metric, predictions, references), group.at(metric).get<double>(), 1e-9)
          << metric << " of cases " << first << ".." << first + count - 1;
    }
  }
}

TEST(RulerMetrics, ContainsDiffersOnlyByPostprocessing) {
  // kvc's "contains" is RULER's matching without postprocess_pred; count where that changes a score, so
  // that the difference stays known.
  size_t differing = 0, differing_after_postprocess = 0, total = 0;
  for (const auto& c : official().at("cases")) {
    ++total;
    const std::string prediction = c.at("prediction");
    const double official_score = c.at("string_match_all").get<double>();
    if (std::abs(100 * kvc::contains_answer(prediction, references_of(c)) - official_score) > 1e-9) ++differing;
    const double lowered_only = kvc::contains_answer(c.value("postprocessed", prediction), references_of(c));
    if (std::abs(100 * lowered_only - official_score) > 1e-9) ++differing_after_postprocess;
  }
  RecordProperty("contains_differs", std::to_string(differing) + "/" + std::to_string(total));
  EXPECT_GT(differing, 0u);
  EXPECT_EQ(differing_after_postprocess, 0u);
}

TEST(RulerMetrics, PythonLowerSpecialCases) {
  const auto lower = [](const std::string& text) {
    return kvc::encode_utf8(kvc::python_unicode::lower(kvc::decode_utf8(text)));
  };
  EXPECT_EQ(lower("\u0130"), "i\u0307");                                     // two code points
  EXPECT_EQ(lower("\u039f\u0394\u039f\u03a3"), "\u03bf\u03b4\u03bf\u03c2");  // final sigma
  EXPECT_EQ(lower("\u03a3\u0391"), "\u03c3\u03b1");                          // not final
  EXPECT_EQ(lower("A'\u03a3'"), "a'\u03c2'");                                // apostrophes are case-ignorable
  EXPECT_EQ(lower("\u212a\uff21\U00010400"), "k\uff41\U00010428");           // Kelvin sign, fullwidth, Deseret
}

TEST(RulerMetrics, BytesThatAreNotUtf8CountAsReplacementCharacters) {
  // Python would see one U+FFFD for the truncated three-byte sequence, as utf8_lossy gives.
  EXPECT_EQ(kvc::ruler_string_match_all("ab\xe2\x82 cd", {"b\ufffd c"}), 1.0);
  EXPECT_EQ(kvc::ruler_string_match_all("ab\xe2\x82 cd", {"b\ufffd\ufffd c"}), 0.0);
  EXPECT_EQ(kvc::ruler_string_match_all("x", {}), 0.0);
  EXPECT_EQ(kvc::ruler_string_match_part("x", {}), 0.0);
}

}  // namespace
