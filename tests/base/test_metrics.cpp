// Answer metrics against values computed by hand (arithmetic in the comments), following LongBench's
// metrics.py, the `rouge` package and fuzzywuzzy as LongBench's requirements.txt installs it (with
// difflib's SequenceMatcher: python-Levenshtein is not among them). test_longbench_scorer.cpp compares
// the same metrics with scores the official code computed.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "metrics/metrics.h"
#include "util/error.h"

namespace {

using kvc::score_with_metric;

// Rouge-L divides by P + R + 1e-8, so "exact" values are off by about 1e-8.
constexpr double kRougeTolerance = 1e-7;

TEST(NormalizeAnswer, LowersDropsPunctuationArticlesAndExtraSpace) {
  // lower -> "  the  quick, brown-fox's "answer"!  ", punctuation -> "  the  quick brownfoxs answer  ",
  // articles -> "    quick brownfoxs answer  ", whitespace -> "quick brownfoxs answer".
  EXPECT_EQ(kvc::normalize_answer("  The  Quick, brown-fox's \"answer\"!  "), "quick brownfoxs answer");
  EXPECT_EQ(kvc::normalize_answer("An apple a day"), "apple day");
  // Articles only as whole words: "anthem", "theory" and "atheist" keep their letters.
  EXPECT_EQ(kvc::normalize_answer("the anthem theory atheist"), "anthem theory atheist");
  // Removing punctuation can expose an article: "a." becomes the word "a".
  EXPECT_EQ(kvc::normalize_answer("plan a. b"), "plan b");
  EXPECT_EQ(kvc::normalize_answer(""), "");
}

TEST(NormalizeAnswer, FollowsPythonStrSemanticsBeyondAscii) {
  EXPECT_EQ(kvc::normalize_answer("ÉCOLE Ÿes"), "école ÿes");
  // A no-break space separates words as str.split() does.
  EXPECT_EQ(kvc::normalize_answer("cat\u00a0dog"), "cat dog");
  // An em dash is not ASCII punctuation, so it stays, but it is a word boundary for \b: "the" goes.
  EXPECT_EQ(kvc::normalize_answer("the\u2014end"), "\u2014end");
  // Accented letters are word characters: no article inside "théâtre".
  EXPECT_EQ(kvc::normalize_answer("théâtre"), "théâtre");
  EXPECT_EQ(kvc::split_whitespace(" a\u3000b\n\tc "), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(NormalizeAnswer, LowersAndFindsWordsAsPythonDoes) {
  // str.lower() picks the final sigma at the end of a word, and lowers İ to "i" + U+0307.
  EXPECT_EQ(kvc::normalize_answer("ΟΔΟΣ ΣΟΦΟΣ"), "οδος σοφος");
  EXPECT_EQ(kvc::normalize_answer("İ"), "i\u0307");
  // A combining mark is not a word character for re's \b, so "the" before one is a whole word and goes.
  EXPECT_EQ(kvc::normalize_answer("the\u0301 end"), "\u0301 end");
}

TEST(Count, NumbersAreRunsOfAnyDecimalDigits) {
  // Python's \d matches full-width digits: the numbers are "１２" and "12", one of them written as "12".
  EXPECT_DOUBLE_EQ(kvc::count_score("１２ and 12", "12"), 0.5);
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("１２", "Paragraph １２"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("Paragraph 12", "Paragraph １２"), 0.0);
}

TEST(QaF1, MatchesHandComputedValues) {
  // Both normalise to "eiffel tower": P = R = 1.
  EXPECT_DOUBLE_EQ(kvc::qa_f1_score("The Eiffel Tower!", "eiffel tower"), 1.0);
  // "cat sat on mat" (4 tokens) vs "cat on mat" (3): overlap 3, P = 3/4, R = 1, F1 = 1.5 / 1.75 = 6/7.
  EXPECT_NEAR(kvc::qa_f1_score("a cat sat on the mat", "cat on mat"), 6.0 / 7.0, 1e-12);
  // Multiset overlap: "cat cat cat" vs "cat cat dog" share min(3, 2) = 2 cats: P = R = 2/3.
  EXPECT_NEAR(kvc::qa_f1_score("the the cat cat cat", "cat cat dog"), 2.0 / 3.0, 1e-12);
  EXPECT_DOUBLE_EQ(kvc::qa_f1_score("dog", "cat"), 0.0);
  EXPECT_DOUBLE_EQ(kvc::qa_f1_score("", "cat"), 0.0);
  EXPECT_DOUBLE_EQ(kvc::qa_f1_score("", ""), 0.0);      // no overlap, as in LongBench
  EXPECT_DOUBLE_EQ(kvc::qa_f1_score("the", "a"), 0.0);  // both empty after normalisation
}

TEST(RougeL, SingleSentencesOfDistinctWordsArePlainLcsF1) {
  // "police killed" (or "the gunman") is an LCS: 2 of 4 words each way, P = R = 1/2, F = 1/2.
  EXPECT_NEAR(kvc::rouge_l_score("police killed the gunman", "the gunman police killed"), 0.5, kRougeTolerance);
  // LCS "police the gunman": P = R = 3/4.
  EXPECT_NEAR(kvc::rouge_l_score("police kill the gunman", "police killed the gunman"), 0.75, kRougeTolerance);
  EXPECT_NEAR(kvc::rouge_l_score("the cat sat", "the cat sat"), 1.0, kRougeTolerance);
  // Case matters (the package does not lower-case): only "sat" is shared, P = R = 1/3.
  EXPECT_NEAR(kvc::rouge_l_score("The Cat sat", "the cat sat"), 1.0 / 3.0, kRougeTolerance);
}

TEST(RougeL, CountsDistinctWordsAsTheRougePackageDoes) {
  // Reference words {the, dog}: m = 2; predicted {the, cat, dog}: n = 3; LCS "the dog" -> 2 words.
  // R = 2/2, P = 2/3, F = 2·(2/3)·1 / (5/3) = 0.8 (token-count F1 would give 2/3).
  EXPECT_NEAR(kvc::rouge_l_score("the cat the dog", "the dog"), 0.8, kRougeTolerance);
}

TEST(RougeL, UnitesLcsWordsOverSentences) {
  // Predicted sentences "the cat sat" | "the dog ran"; reference "the dog sat" (the final '.' leaves an
  // empty piece, which is dropped). LCS words: {the, sat} and {the, dog}; union 3 words.
  // m = |{the, dog, sat}| = 3, n = |{the, cat, sat, dog, ran}| = 5: R = 1, P = 3/5, F = 1.2 / 1.6 = 0.75.
  EXPECT_NEAR(kvc::rouge_l_score("the cat sat. the dog ran.", "the dog sat."), 0.75, kRougeTolerance);
}

TEST(RougeL, ReconstructsTheSameLcsAsThePackage) {
  // Reference "to be to", prediction "be to to": "be to" and "to to" are both LCSs. Walking back from the
  // end, the package takes the final "to", then at (ref "to be", pred "be to") the table values above and
  // to the left tie (1 and 1) so it moves left, and matches "be": words {to, be}, 2 of m = n = 2: F = 1.
  EXPECT_NEAR(kvc::rouge_l_score("be to to", "to be to"), 1.0, kRougeTolerance);
}

TEST(RougeL, ScoresZeroWhereThePackageRunsOutOfRecursion) {
  // The package rebuilds an LCS recursively; "w0" against one sentence of n distinct words walks n steps.
  // Under eval.py, n = 990 still fits Python's recursion limit of 1000: R = 1, P = 1/990, F > 0; at 991
  // the RecursionError is caught by LongBench's bare except and the score is 0.
  auto words = [](int n) {
    std::string text = "w0";
    for (int i = 1; i < n; ++i) text += " w" + std::to_string(i);
    return text;
  };
  EXPECT_NEAR(kvc::rouge_l_score(words(990), "w0"), 2.0 * (1.0 / 990) / (1.0 / 990 + 1 + 1e-8), 1e-15);
  EXPECT_DOUBLE_EQ(kvc::rouge_l_score(words(991), "w0"), 0.0);
}

TEST(RougeL, EmptySidesScoreZero) {
  EXPECT_DOUBLE_EQ(kvc::rouge_l_score("", "the cat"), 0.0);
  EXPECT_DOUBLE_EQ(kvc::rouge_l_score("the cat", ""), 0.0);
  EXPECT_DOUBLE_EQ(kvc::rouge_l_score("...", "the cat"), 0.0);  // only dots: no sentence
}

TEST(CodeSim, RoundsLikeFuzzRatio) {
  // difflib: longest block "itt", then "n" right of it: 4 matches, 100·8/13 = 61.54 -> 62.
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("kitten", "sitting"), 0.62);
  // One match in 8 + 8 characters: 100·2/16 = 12.5, rounded half to even -> 12.
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("abcdefgh", "aXXXXXXX"), 0.12);
  // "return x" vs "return y": block "return " of 7, 100·14/16 = 87.5 -> 88 (even).
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("\n\nreturn x\nfoo()", "return y"), 0.88);
  // fuzz.ratio's decorators: equal strings 100 (two empty ones too), one empty side 0.
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("", ""), 1.0);
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("x", ""), 0.0);
}

TEST(CodeSim, UsesDifflibNotAnLcs) {
  // "cbc" vs "bac": difflib takes the earliest longest block, "c" (a[0] = b[2]), and nothing is left on
  // either side of it: 1 match, 100·2/6 -> 33. The LCS "bc" that python-Levenshtein counts gives 67.
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("cbc", "bac"), 0.33);
  // autojunk: in a ground truth of 200 or more characters, a character occurring more than 200/100 + 1
  // = 3 times cannot start a block. "ab"·100 has only such characters, so the block search finds nothing
  // and widening the empty block at the start fails on 'c' vs 'a': 0 matches, score 0.
  const std::string repeated = [] {
    std::string text;
    for (int i = 0; i < 100; ++i) text += "ab";
    return text;
  }();
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("c" + repeated, repeated), 0.0);
  // With 99 pairs (198 characters) autojunk is off: 198 matches, 100·396/397 = 99.7 -> 100.
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("c" + repeated.substr(2), repeated.substr(2)), 1.0);
}

TEST(CodeSim, SkipsFencesAndComments) {
  // Lines containing '`', '#' or "//" anywhere are passed over, as in LongBench.
  const std::string prediction = "```python\n# set up\nx = foo(1)  # trailing\ny = a // b\nreturn y\n```";
  EXPECT_DOUBLE_EQ(kvc::code_sim_score(prediction, "return y"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::code_sim_score("# only\n```", "return y"), 0.0);  // compares "" with it
}

TEST(Classification, MatchesLongBench) {
  const std::vector<std::string> trec = {"Description", "Entity", "Abbreviation", "Human", "Location", "Numeric"};
  EXPECT_DOUBLE_EQ(kvc::classification_score("Location", "Location", trec), 1.0);
  // Two classes named, the right one among them: 1/2.
  EXPECT_DOUBLE_EQ(kvc::classification_score("Location or Human", "Location", trec), 0.5);
  EXPECT_DOUBLE_EQ(kvc::classification_score("Entity", "Location", trec), 0.0);
  EXPECT_DOUBLE_EQ(kvc::classification_score("", "Location", trec), 0.0);
  // "location" is part of the ground truth "Other location" but not equal to it: dropped, leaving 1.
  EXPECT_DOUBLE_EQ(kvc::classification_score("Other location", "Other location", {"location", "Other location"}), 1.0);
}

TEST(Classification, ReproducesLongBenchRemovalDuringIteration) {
  // Matched: [Other location, location, Other]. Index 0 stays; index 1 "location" is removed, which moves
  // "Other" to index 1, and the loop ends at index 2 without looking at it. 1 / 2 classes left = 0.5.
  EXPECT_DOUBLE_EQ(
      kvc::classification_score("Other location", "Other location", {"Other location", "location", "Other"}), 0.5);
}

TEST(Retrieval, CountsTheRightParagraphNumber) {
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("Paragraph 12", "Paragraph 12"), 1.0);
  // Numbers 12 and 3, one right: 1/2.
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("Paragraph 12 or Paragraph 3", "Paragraph 12"), 0.5);
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("Paragraph 120", "Paragraph 12"), 0.0);
  EXPECT_DOUBLE_EQ(kvc::retrieval_score("no idea", "Paragraph 12"), 0.0);
  EXPECT_THROW(kvc::retrieval_score("Paragraph 1", "the first one"), kvc::Error);
}

TEST(Count, IsTheShareOfRightNumbers) {
  // Numbers 7 and 8, one right: 1/2.
  EXPECT_DOUBLE_EQ(kvc::count_score("There are 7 unique paragraphs, not 8", "7"), 0.5);
  EXPECT_DOUBLE_EQ(kvc::count_score("7", "7"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::count_score("seven", "7"), 0.0);
}

TEST(ExactMatch, ComparesNormalisedText) {
  EXPECT_DOUBLE_EQ(kvc::exact_match_score(" 12345. ", "12345"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::exact_match_score("The Louvre", "louvre!"), 1.0);
  EXPECT_DOUBLE_EQ(kvc::exact_match_score("12345 and more", "12345"), 0.0);
}

TEST(Contains, IsTheShareOfReferencesFound) {
  // Two of three references appear: 2/3.
  EXPECT_NEAR(kvc::contains_answer("The values are 1234567 and 7654321.", {"1234567", "7654321", "1111111"}), 2.0 / 3.0,
              1e-12);
  EXPECT_DOUBLE_EQ(kvc::contains_answer("The answer is PURPLE", {"purple"}), 1.0);
  EXPECT_DOUBLE_EQ(kvc::contains_answer("anything", {}), 0.0);
  EXPECT_DOUBLE_EQ(kvc::contains_answer("", {"x"}), 0.0);
}

TEST(ScoreWithMetric, TakesTheBestAnswer) {
  const std::vector<std::string> answers = {"cat on mat", "The Eiffel Tower"};
  EXPECT_DOUBLE_EQ(score_with_metric("qa_f1", "eiffel tower", answers), 1.0);
  EXPECT_NEAR(score_with_metric("qa_f1", "a cat sat on the mat", answers), 6.0 / 7.0, 1e-12);
  EXPECT_DOUBLE_EQ(score_with_metric("qa_f1", "eiffel tower", {}), 0.0);
  EXPECT_DOUBLE_EQ(score_with_metric("classification", "Human", {"Human"}, {"Human", "Location"}), 1.0);
  EXPECT_DOUBLE_EQ(score_with_metric("retrieval", "Paragraph 4", {"Paragraph 4"}), 1.0);
  EXPECT_DOUBLE_EQ(score_with_metric("count", "3", {"3"}), 1.0);
  EXPECT_DOUBLE_EQ(score_with_metric("exact_match", "Paris.", {"London", "paris"}), 1.0);
  EXPECT_DOUBLE_EQ(score_with_metric("code_sim", "kitten", {"sitting"}), 0.62);
  EXPECT_NEAR(score_with_metric("rouge_l", "police kill the gunman", {"police killed the gunman"}), 0.75,
              kRougeTolerance);
}

TEST(ScoreWithMetric, ContainsNeedsEveryAnswer) {
  // Not the best single answer (which would be 1) but the share found: 1/2.
  EXPECT_DOUBLE_EQ(score_with_metric("contains", "It is 1234567.", {"1234567", "7654321"}), 0.5);
}

TEST(ScoreWithMetric, UnknownNameListsTheValidOnes) {
  EXPECT_EQ(kvc::metric_names().size(), 13u);
  try {
    score_with_metric("bleu", "x", {"x"});
    FAIL() << "expected kvc::Error";
  } catch (const kvc::Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("'bleu'"), std::string::npos) << message;
    for (const auto& name : kvc::metric_names()) EXPECT_NE(message.find(name), std::string::npos) << message;
  }
  EXPECT_THROW(kvc::check_metric_name("F1"), kvc::Error);
  EXPECT_NO_THROW(kvc::check_metric_name("contains"));
}

}  // namespace
