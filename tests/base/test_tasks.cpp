// Task generators and the LongBench reader. Token budgets are counted in whitespace words here; the
// generators only ever see the counter. Every synthetic answer is recomputed from the generated context.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "metrics/metric_registry.h"
#include "tasks/haystack.h"
#include "tasks/longbench.h"
#include "tasks/needle.h"
#include "tasks/synthetic.h"
#include "tasks/text_template.h"
#include "tasks/token_budget.h"
#include "util/error.h"

namespace {

size_t count_words(const std::string& text) {
  std::istringstream in(text);
  size_t words = 0;
  for (std::string word; in >> word;) ++words;
  return words;
}

const kvc::TokenCounter kWordCounter = count_words;

std::string essays() {
  static const std::string text =
      kvc::load_haystack({std::string(KVC_SOURCE_DIR) + "/data/text/pg_essays/addiction.txt",
                          std::string(KVC_SOURCE_DIR) + "/data/text/pg_essays/aord.txt",
                          std::string(KVC_SOURCE_DIR) + "/data/text/pg_essays/apple.txt"});
  return text;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const kvc::Error& error) {
    return error.what();
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------
// Haystack text

TEST(Haystack, SplitsSentencesAndJoinsBack) {
  const std::string text = "Mr. Darcy smiled. She left! Did he (really)? Yes.\n\nNew paragraph without end";
  const auto sentences = kvc::split_sentences(text);
  EXPECT_EQ(sentences, (std::vector<std::string>{"Mr. Darcy smiled. ", "She left! ", "Did he (really)? ", "Yes.\n\n",
                                                 "New paragraph without end"}));
  std::string joined;
  for (const auto& sentence : sentences) joined += sentence;
  EXPECT_EQ(joined, text);
  // Initials and "e.g." do not end sentences; a period inside a number does not either.
  EXPECT_EQ(kvc::split_sentences("J. R. Smith paid 3.50 dollars, e.g. once. Then").size(), 2u);
}

TEST(Haystack, NoiseIsRulersFiveSentences) {
  EXPECT_EQ(kvc::noise_sentences().size(), 5u);
  EXPECT_EQ(kvc::noise_sentences().front(), "The grass is green. ");
  EXPECT_EQ(kvc::filler_sentences(""), kvc::noise_sentences());
}

TEST(Haystack, InsertsAtTheNearestBoundaryAndCycles) {
  const std::vector<std::string> sentences = {"One two. ", "Three four. "};
  // 4 filler sentences: boundaries at characters 0, 9, 21, 30, 42; depth 0.5 -> 21 -> after the 2nd.
  const auto assembled = kvc::assemble_haystack(sentences, 4, {{0.5, "NEEDLE."}, {0.0, "FIRST."}, {1.0, "LAST."}});
  EXPECT_EQ(assembled.text, "FIRST. One two. Three four. NEEDLE. One two. Three four. LAST.");
  EXPECT_EQ(assembled.offsets, (std::vector<size_t>{28, 0, 57}));
}

TEST(Haystack, LoadReportsMissingFiles) {
  const std::string message = error_of([] { kvc::load_haystack({"/no/such/haystack.txt"}); });
  EXPECT_TRUE(contains(message, "/no/such/haystack.txt")) << message;
}

TEST(Haystack, LargestFittingFindsTheExactLimit) {
  // build(n) has n + 3 words: with a budget of 100 the answer is 97, and never more than max_count.
  const auto build = [](size_t n) {
    std::string text = "a b c";
    for (size_t i = 0; i < n; ++i) text += " w";
    return text;
  };
  EXPECT_EQ(kvc::largest_fitting(1000, 100, kWordCounter, build), 97u);
  EXPECT_EQ(kvc::largest_fitting(40, 100, kWordCounter, build), 40u);
  EXPECT_FALSE(kvc::largest_fitting(1000, 2, kWordCounter, build).has_value());
}

TEST(TextTemplate, FillsKnownPlaceholdersOnce) {
  EXPECT_EQ(kvc::fill_placeholders("{a} and {b} {unknown} {", {{"a", "{b}"}, {"b", "B"}}), "{b} and B {unknown} {");
}

// ---------------------------------------------------------------------------------------------------
// Needle in a haystack

TEST(Needle, DepthZeroPutsTheNeedleFirst) {
  const auto sample = kvc::make_needle_sample({}, essays(), 500, 0.0, 1, kWordCounter);
  EXPECT_EQ(sample.needle_offset, 0u);
  EXPECT_EQ(sample.context.rfind(sample.needle, 0), 0u);
  EXPECT_DOUBLE_EQ(sample.depth, 0.0);
}

TEST(Needle, DepthOnePutsTheNeedleLast) {
  const auto sample = kvc::make_needle_sample({}, essays(), 500, 1.0, 1, kWordCounter);
  EXPECT_EQ(sample.needle_offset + sample.needle.size(), sample.context.size());
  EXPECT_DOUBLE_EQ(sample.depth, 1.0);
}

TEST(Needle, MiddleDepthIsRealisedWithinASentence) {
  for (double depth : {0.25, 0.5, 0.75}) {
    const auto sample = kvc::make_needle_sample({}, essays(), 2000, depth, 3, kWordCounter);
    EXPECT_NEAR(sample.depth, depth, 0.03) << "asked depth " << depth;
    // At a sentence boundary: what precedes the needle ends a sentence.
    const std::string before = sample.context.substr(0, sample.needle_offset);
    const size_t last = before.find_last_not_of(" \n\t");
    ASSERT_NE(last, std::string::npos);
    EXPECT_TRUE(std::string(".!?\"')]").find(before[last]) != std::string::npos)
        << "needle follows '" << before.substr(before.size() - 20) << "'";
  }
}

TEST(Needle, NeverExceedsTheBudgetAndComesClose) {
  size_t longest_sentence = 0;
  for (const auto& sentence : kvc::split_sentences(essays()))
    longest_sentence = std::max(longest_sentence, count_words(sentence));
  for (size_t budget : {30, 64, 257, 1000, 3000}) {
    for (double depth : {0.0, 0.3, 0.5, 1.0}) {
      for (uint64_t seed : {1, 2}) {
        const auto sample = kvc::make_needle_sample({}, essays(), budget, depth, seed, kWordCounter);
        const size_t used = count_words(sample.context);
        EXPECT_LE(used, budget) << "budget " << budget << " depth " << depth;
        // One more sentence would not have fitted, so the gap is under the longest sentence.
        EXPECT_GT(used + longest_sentence, budget) << "budget " << budget << " depth " << depth;
      }
    }
  }
}

TEST(Needle, RepeatsAShortHaystack) {
  const auto sample =
      kvc::make_needle_sample({}, "Short haystack here. Only two sentences.", 200, 0.5, 1, kWordCounter);
  EXPECT_LE(count_words(sample.context), 200u);
  EXPECT_GT(count_words(sample.context), 190u);
}

TEST(Needle, SampleHoldsTheAnswerAndAsksForIt) {
  const auto sample = kvc::make_needle_sample({}, essays(), 800, 0.4, 7, kWordCounter);
  ASSERT_EQ(sample.answers.size(), 1u);
  const std::string& number = sample.answers.front();
  EXPECT_EQ(number.size(), 5u);
  EXPECT_NE(number.front(), '0');
  EXPECT_TRUE(contains(sample.context, sample.needle));
  EXPECT_TRUE(contains(sample.needle, number));
  EXPECT_EQ(sample.metric, "contains");
  // Question and needle name the same entity; the question does not give the number away.
  const std::smatch entity = [&] {
    std::smatch match;
    std::regex_search(sample.needle, match, std::regex("The secret number of the (.+) is (\\d+)\\."));
    return match;
  }();
  ASSERT_EQ(entity.size(), 3u);
  EXPECT_EQ(entity[2].str(), number);
  EXPECT_EQ(sample.question, "\nWhat is the secret number of the " + entity[1].str() + "? The secret number of the " +
                                 entity[1].str() + " is");
  EXPECT_FALSE(contains(sample.question, number));
}

TEST(Needle, SameSeedSameSampleOtherSeedOtherNumber) {
  const auto first = kvc::make_needle_sample({}, essays(), 300, 0.5, 42, kWordCounter);
  const auto again = kvc::make_needle_sample({}, essays(), 300, 0.5, 42, kWordCounter);
  EXPECT_EQ(first.context, again.context);
  EXPECT_EQ(first.question, again.question);
  EXPECT_EQ(first.answers, again.answers);
  std::set<std::string> numbers, questions;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    const auto sample = kvc::make_needle_sample({}, essays(), 300, 0.5, seed, kWordCounter);
    numbers.insert(sample.answers.front());
    questions.insert(sample.question);
  }
  EXPECT_EQ(numbers.size(), 10u);
  EXPECT_GE(questions.size(), 9u);  // 7670 entities: a repeat among 10 is possible but unlikely
}

TEST(Needle, PassKeyVariant) {
  const auto sample = kvc::make_needle_sample(kvc::passkey_needle_spec(), essays(), 400, 0.5, 5, kWordCounter);
  const std::string& key = sample.answers.front();
  EXPECT_EQ(sample.needle, "The pass key is " + key + ". Remember it. " + key + " is the pass key.");
  EXPECT_EQ(sample.question, "\nWhat is the pass key? The pass key is");
  EXPECT_LE(count_words(sample.context), 400u);
}

TEST(Needle, RejectsImpossibleRequests) {
  // The needle alone has 9 words.
  EXPECT_TRUE(contains(error_of([] { kvc::make_needle_sample({}, essays(), 5, 0.5, 1, kWordCounter); }), "too small"));
  EXPECT_THROW(kvc::make_needle_sample({}, essays(), 500, 1.5, 1, kWordCounter), kvc::Error);
  kvc::NeedleSpec no_entities;
  no_entities.entities.clear();
  EXPECT_THROW(kvc::make_needle_sample(no_entities, essays(), 500, 0.5, 1, kWordCounter), kvc::Error);
  EXPECT_THROW(kvc::make_needle_sample({}, "   \n  ", 500, 0.5, 1, kWordCounter), kvc::Error);
}

// ---------------------------------------------------------------------------------------------------
// Synthetic tasks: generic properties

TEST(Synthetic, EveryTaskFitsItsBudgetAndHoldsItsAnswers) {
  for (const auto& name : kvc::synthetic_task_names()) {
    for (size_t budget : {150, 600, 2500}) {
      for (const std::string& haystack : {std::string(), essays()}) {
        const auto sample = kvc::make_synthetic_sample(name, budget, 11, kWordCounter, haystack);
        const std::string where = name + " @" + std::to_string(budget) + (haystack.empty() ? " noise" : " essays");
        EXPECT_LE(count_words(sample.context), budget) << where;
        EXPECT_GT(count_words(sample.context), budget / 2) << where;
        EXPECT_EQ(sample.metric, "contains") << where;
        ASSERT_FALSE(sample.answers.empty()) << where;
        for (const auto& answer : sample.answers)
          EXPECT_TRUE(contains(sample.context, answer)) << where << ": " << answer;
        EXPECT_FALSE(sample.question.empty()) << where;
        EXPECT_FALSE(contains(sample.context, sample.question)) << where;
        EXPECT_TRUE(contains(sample.id, name)) << where;
      }
    }
  }
}

TEST(Synthetic, DeterministicBySeed) {
  for (const auto& name : kvc::synthetic_task_names()) {
    const auto first = kvc::make_synthetic_sample(name, 500, 3, kWordCounter);
    const auto again = kvc::make_synthetic_sample(name, 500, 3, kWordCounter);
    const auto other = kvc::make_synthetic_sample(name, 500, 4, kWordCounter);
    EXPECT_EQ(first.context, again.context) << name;
    EXPECT_EQ(first.question, again.question) << name;
    EXPECT_EQ(first.answers, again.answers) << name;
    EXPECT_NE(first.context, other.context) << name;
    EXPECT_NE(first.answers, other.answers) << name;
  }
}

TEST(Synthetic, UnknownTaskListsTheValidOnes) {
  const std::string message = error_of([] { kvc::make_synthetic_sample("niah_triple", 500, 1, kWordCounter); });
  EXPECT_TRUE(contains(message, "'niah_triple'")) << message;
  for (const auto& name : kvc::synthetic_task_names()) EXPECT_TRUE(contains(message, name)) << message;
  EXPECT_EQ(kvc::synthetic_task_names().size(), 7u);
}

TEST(Synthetic, TooSmallBudgetIsAnError) {
  EXPECT_THROW(kvc::make_synthetic_sample("niah_multikey", 20, 1, kWordCounter), kvc::Error);
  EXPECT_THROW(kvc::make_synthetic_sample("common_words", 20, 1, kWordCounter), kvc::Error);
}

// ---------------------------------------------------------------------------------------------------
// Synthetic tasks: answers recomputed from the context alone

// Keys named in "What are all the special magic numbers for K1, K2, and K3 mentioned ...".
std::vector<std::string> asked_keys(const std::string& question) {
  std::smatch match;
  EXPECT_TRUE(std::regex_search(question, match, std::regex("numbers for (.+) mentioned in the provided text")));
  std::vector<std::string> keys;
  const std::regex key("[a-z]+-[a-z]+");
  const std::string listed = match[1].str();
  for (auto it = std::sregex_iterator(listed.begin(), listed.end(), key); it != std::sregex_iterator(); ++it) {
    keys.push_back(it->str());
  }
  return keys;
}

struct NiahCase {
  const char* name;
  size_t keys_hidden, values_per_key, keys_asked;
};

TEST(SyntheticRecompute, NiahAnswersAreTheAskedKeysValues) {
  const NiahCase cases[] = {
      {"niah_single", 1, 1, 1}, {"niah_multikey", 4, 1, 1}, {"niah_multivalue", 1, 4, 1}, {"niah_multiquery", 4, 1, 4}};
  for (const auto& task : cases) {
    for (uint64_t seed : {1, 2, 3}) {
      const auto sample = kvc::make_synthetic_sample(task.name, 1000, seed, kWordCounter, essays());
      std::map<std::string, std::vector<std::string>> facts;
      const std::regex fact("One of the special magic numbers for ([a-z]+-[a-z]+) is: (\\d{7})\\.");
      for (auto it = std::sregex_iterator(sample.context.begin(), sample.context.end(), fact);
           it != std::sregex_iterator(); ++it) {
        facts[(*it)[1].str()].push_back((*it)[2].str());
      }
      ASSERT_EQ(facts.size(), task.keys_hidden) << task.name;
      for (const auto& [key, values] : facts) EXPECT_EQ(values.size(), task.values_per_key) << task.name;
      const auto keys = asked_keys(sample.question);
      ASSERT_EQ(keys.size(), task.keys_asked) << task.name << ": " << sample.question;
      std::multiset<std::string> expected;
      for (const auto& key : keys) {
        ASSERT_TRUE(facts.count(key)) << task.name << " asks for a key not in the context: " << key;
        expected.insert(facts[key].begin(), facts[key].end());
      }
      EXPECT_EQ(std::multiset<std::string>(sample.answers.begin(), sample.answers.end()), expected) << task.name;
      EXPECT_TRUE(contains(sample.answer_prefix, keys.front())) << task.name;
    }
  }
}

TEST(SyntheticRecompute, VariableTrackingChainsResolveToTheAnswers) {
  for (const std::string& haystack : {std::string(), essays()}) {
    for (uint64_t seed : {1, 2, 3, 4}) {
      const auto sample = kvc::make_synthetic_sample("variable_tracking", 800, seed, kWordCounter, haystack);
      // Replay the assignments in text order; a copy must read a variable assigned earlier.
      std::map<std::string, std::string> value_of;
      const std::regex assignment("VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5})|(\\d+))\\.");
      size_t statements = 0;
      for (auto it = std::sregex_iterator(sample.context.begin(), sample.context.end(), assignment);
           it != std::sregex_iterator(); ++it, ++statements) {
        const auto& match = *it;
        ASSERT_FALSE(value_of.count(match[1].str())) << "assigned twice: " << match[1].str();
        if (match[2].matched) {
          ASSERT_TRUE(value_of.count(match[2].str())) << match[2].str() << " read before it is assigned";
          value_of[match[1].str()] = value_of[match[2].str()];
        } else {
          value_of[match[1].str()] = match[3].str();
        }
      }
      EXPECT_EQ(statements, 10u);  // two chains of five variables
      std::smatch query;
      ASSERT_TRUE(std::regex_search(sample.question, query, std::regex("assigned the value (\\d+) in the text")));
      std::set<std::string> holding;
      for (const auto& [name, value] : value_of) {
        if (value == query[1].str()) holding.insert(name);
      }
      EXPECT_EQ(holding.size(), 5u);
      EXPECT_EQ(std::set<std::string>(sample.answers.begin(), sample.answers.end()), holding);
    }
  }
}

// Occurrences of each word, in a list "1. w 2. w ..." whose numbers must run 1, 2, 3, ...
std::map<std::string, size_t> count_numbered_list(const std::string& context) {
  std::map<std::string, size_t> counts;
  const std::regex entry("(\\d+)\\. ([a-z]+)");
  size_t expected_number = 1;
  const size_t list_start = context.find("1. ");
  for (auto it = std::sregex_iterator(context.begin() + list_start, context.end(), entry); it != std::sregex_iterator();
       ++it) {
    EXPECT_EQ(std::stoul((*it)[1].str()), expected_number++);
    ++counts[(*it)[2].str()];
  }
  return counts;
}

// Checks that `answers` are exactly the `top` most frequent words, each strictly more frequent than any other.
void expect_top_words(const std::map<std::string, size_t>& counts, const std::vector<std::string>& answers, size_t top,
                      const std::string& where) {
  ASSERT_EQ(answers.size(), top) << where;
  ASSERT_GT(counts.size(), top) << where;
  size_t least_answer = SIZE_MAX, most_other = 0;
  for (const auto& [word, count] : counts) {
    if (std::find(answers.begin(), answers.end(), word) != answers.end()) {
      least_answer = std::min(least_answer, count);
    } else {
      most_other = std::max(most_other, count);
    }
  }
  for (const auto& answer : answers) EXPECT_TRUE(counts.count(answer)) << where << ": " << answer;
  EXPECT_GT(least_answer, most_other) << where;
}

TEST(SyntheticRecompute, CommonWordsAreTheMostFrequentInTheList) {
  for (size_t budget : {150, 600, 1500, 5000}) {
    for (uint64_t seed : {1, 2}) {
      const auto sample = kvc::make_synthetic_sample("common_words", budget, seed, kWordCounter);
      const auto counts = count_numbered_list(sample.context);
      const std::string where = "common_words @" + std::to_string(budget);
      expect_top_words(counts, sample.answers, 10, where);
      EXPECT_GE(counts.size(), 20u) << where;  // at least as many rare words as common ones
    }
  }
}

TEST(SyntheticRecompute, FrequentWordsAreTheTopThree) {
  for (size_t budget : {150, 600, 3000}) {
    for (uint64_t seed : {1, 2}) {
      const auto sample = kvc::make_synthetic_sample("frequent_words", budget, seed, kWordCounter);
      const std::string coded = sample.context.substr(sample.context.find('\n') + 1);
      std::map<std::string, size_t> counts;
      std::istringstream in(coded);
      for (std::string word; in >> word;) ++counts[word];
      expect_top_words(counts, sample.answers, 3, "frequent_words @" + std::to_string(budget));
      std::vector<size_t> answer_counts;
      for (const auto& answer : sample.answers) answer_counts.push_back(counts[answer]);
      EXPECT_TRUE(std::is_sorted(answer_counts.rbegin(), answer_counts.rend()));  // most frequent first
    }
  }
}

// ---------------------------------------------------------------------------------------------------
// LongBench

class LongBenchFile : public ::testing::Test {
 protected:
  std::string write(const std::string& name, const std::string& contents) {
    const std::string path = ::testing::TempDir() + name;
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
};

const char* const kGoodLine =
    R"({"input": "Who wrote it?", "context": "Jane Austen wrote it.", "answers": ["Jane Austen"], "length": 4, "all_classes": null, "_id": "abc"})";

TEST_F(LongBenchFile, ReadsSamples) {
  const std::string path = write(
      "good.jsonl",
      std::string(kGoodLine) + "\n\n" +
          R"({"input": "q?", "context": "c", "answers": ["Human", "Entity"], "all_classes": ["Human", "Entity"]})" +
          "\r\n");
  const auto data = kvc::load_longbench_jsonl(path);
  ASSERT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.skipped_lines, 0u);
  const auto& first = data.samples[0];
  EXPECT_EQ(first.id, "abc");
  EXPECT_EQ(first.context, "Jane Austen wrote it.");
  EXPECT_EQ(first.question, "Who wrote it?");
  EXPECT_EQ(first.answers, std::vector<std::string>{"Jane Austen"});
  EXPECT_TRUE(first.all_classes.empty());
  EXPECT_EQ(data.samples[1].id, "good.jsonl:3");  // no _id: file name and line
  EXPECT_EQ(data.samples[1].all_classes, (std::vector<std::string>{"Human", "Entity"}));
}

TEST_F(LongBenchFile, StopModeNamesFileAndLine) {
  const std::string path = write("stop.jsonl", std::string(kGoodLine) + "\n{\"input\": \"x\", \"context\": \n");
  const std::string message = error_of([&] { kvc::load_longbench_jsonl(path, kvc::OnBadLine::Stop); });
  EXPECT_TRUE(contains(message, path + ":2:")) << message;
  EXPECT_TRUE(contains(message, "JSON")) << message;
}

TEST_F(LongBenchFile, SkipModeWarnsAndCounts) {
  const std::string path =
      write("skip.jsonl", std::string(kGoodLine) + "\n" + "not json\n" +    // line 2
                              R"({"input": "q", "context": "c"})" + "\n" +  // 3: no answers
                              R"({"input": "q", "context": "c", "answers": [1.5, true]})" +
                              "\n" +                                                       // 4: not strings or integers
                              R"({"input": "q", "context": "c", "answers": []})" + "\n" +  // 5: empty
                              R"({"input": 7, "context": "c", "answers": ["a"]})" + "\n" +  // 6: input not text
                              R"({"input": "q", "context": "c", "answers": ["a"], "all_classes": "x"})" + "\n" +  // 7
                              std::string(kGoodLine) + "\n");
  ::testing::internal::CaptureStderr();
  const auto data = kvc::load_longbench_jsonl(path, kvc::OnBadLine::Skip);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(data.samples.size(), 2u);
  EXPECT_EQ(data.skipped_lines, 6u);
  for (int line = 2; line <= 7; ++line) {
    EXPECT_TRUE(contains(warnings, path + ":" + std::to_string(line) + ":")) << warnings;
  }
  EXPECT_TRUE(contains(warnings, "'answers' is missing")) << warnings;
  EXPECT_TRUE(contains(warnings, "'answers' is empty")) << warnings;
}

TEST_F(LongBenchFile, MissingFileIsAnError) {
  EXPECT_THROW(kvc::load_longbench_jsonl(::testing::TempDir() + "absent.jsonl"), kvc::Error);
}

TEST(LongBenchPrompt, FillsContextAndQuestionSeparately) {
  kvc::TaskSample sample;
  sample.context = "Code with {input} braces {}";
  sample.question = "Who?";
  const std::string tmpl = "Read.\n{context}\n\nQuestion: {input}\nAnswer:";
  const auto parts = kvc::split_prompt(tmpl, sample);
  EXPECT_EQ(parts.context_part, "Read.\nCode with {input} braces {}");  // the context is not re-expanded
  EXPECT_EQ(parts.question_part, "\n\nQuestion: Who?\nAnswer:");
  EXPECT_EQ(kvc::build_prompt(tmpl, sample), parts.context_part + parts.question_part);
  EXPECT_THROW(kvc::build_prompt("no placeholder", sample), kvc::Error);
  EXPECT_THROW(kvc::build_prompt("{input} then {context}", sample), kvc::Error);
  EXPECT_THROW(kvc::build_prompt("{context}{context}", sample), kvc::Error);
}

TEST(LongBenchPrompt, StandardTemplatesAndTable) {
  for (const auto& name : kvc::longbench_dataset_names()) {
    const auto& spec = kvc::dataset_spec(name);
    EXPECT_EQ(spec.name, name);
    EXPECT_NO_THROW(kvc::check_metric_name(spec.metric)) << name;
    EXPECT_GT(spec.max_new_tokens, 0) << name;
    kvc::TaskSample sample;
    sample.context = "CONTEXT";
    sample.question = "QUESTION";
    const std::string prompt = kvc::build_prompt(spec.prompt_template, sample);
    EXPECT_TRUE(contains(prompt, "CONTEXT")) << name;
    EXPECT_FALSE(contains(prompt, "{context}")) << name;
    EXPECT_FALSE(contains(prompt, "{input}")) << name;
  }
  EXPECT_EQ(kvc::dataset_spec("hotpotqa").metric, "qa_f1");
  EXPECT_EQ(kvc::dataset_spec("hotpotqa").max_new_tokens, 32);
  EXPECT_EQ(kvc::dataset_spec("gov_report").metric, "rouge_l");
  EXPECT_EQ(kvc::dataset_spec("gov_report").max_new_tokens, 512);
  EXPECT_EQ(kvc::dataset_spec("lcc").metric, "code_sim");
  const std::string message = error_of([] { kvc::dataset_spec("squad"); });
  EXPECT_TRUE(contains(message, "'squad'") && contains(message, "narrativeqa") && contains(message, "lcc")) << message;
}

TEST(LongBenchScore, ScoresTheFirstLineWhereLongBenchDoes) {
  kvc::TaskSample sample;
  sample.answers = {"Location"};
  sample.all_classes = {"Human", "Location"};
  // trec looks at "Location" only; the later "Human" would otherwise halve the score.
  EXPECT_DOUBLE_EQ(kvc::score_prediction(kvc::dataset_spec("trec"), "\nLocation\nHuman", sample), 1.0);
  sample.answers = {"cat on mat"};
  EXPECT_NEAR(kvc::score_prediction(kvc::dataset_spec("hotpotqa"), "a cat sat on the mat", sample), 6.0 / 7.0, 1e-12);
}

}  // namespace
