// RULER's 13 tasks against the structure of RULER's recipe (scripts/synthetic.yaml and
// scripts/data/synthetic/*.py): templates, numbers of needles and how often each answer occurs, word
// frequencies, chains, documents, and the token budget. Tokens are whitespace words here; the generators
// only ever see the counter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tasks/haystack.h"
#include "tasks/ruler_qa_data.h"
#include "tasks/ruler_tasks.h"
#include "util/error.h"

namespace {

size_t count_words(const std::string& text) {
  std::istringstream in(text);
  size_t words = 0;
  for (std::string word; in >> word;) ++words;
  return words;
}

const kvc::TokenCounter kWordCounter = count_words;
const std::string kFixtures = std::string(KVC_SOURCE_DIR) + "/data/text/ruler_qa";

const kvc::RulerInputs& inputs() {
  static const kvc::RulerQaData squad = kvc::load_ruler_qa(kFixtures, "qa_1");
  static const kvc::RulerQaData hotpotqa = kvc::load_ruler_qa(kFixtures, "qa_2");
  static const kvc::RulerInputs in = [] {
    kvc::RulerInputs out;
    out.essay = kvc::load_haystack({std::string(KVC_SOURCE_DIR) + "/data/text/pg_essays/addiction.txt",
                                    std::string(KVC_SOURCE_DIR) + "/data/text/pg_essays/aord.txt"});
    out.squad = &squad;
    out.hotpotqa = &hotpotqa;
    return out;
  }();
  return in;
}

kvc::TaskSample make(const std::string& task, size_t tokens, uint64_t seed = 1, size_t index = 0) {
  return kvc::make_ruler_sample(task, {tokens, seed, index}, kWordCounter, inputs());
}

size_t occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const kvc::Error& error) {
    return error.what();
  }
  return "";
}

// ---------------------------------------------------------------------------------------------------
// The task table

TEST(RulerTasks, TheThirteenNamesAndTheirSettings) {
  EXPECT_EQ(kvc::ruler_task_names(),
            (std::vector<std::string>{"niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                      "niah_multikey_2", "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt",
                                      "cwe", "fwe", "qa_1", "qa_2"}));
  EXPECT_EQ(kvc::ruler_tokens_to_generate("niah_multikey_3"), 128);
  EXPECT_EQ(kvc::ruler_tokens_to_generate("vt"), 30);
  EXPECT_EQ(kvc::ruler_tokens_to_generate("cwe"), 120);
  EXPECT_EQ(kvc::ruler_tokens_to_generate("fwe"), 50);
  EXPECT_EQ(kvc::ruler_tokens_to_generate("qa_2"), 32);
  EXPECT_EQ(kvc::ruler_task_source("niah_single_1"), kvc::RulerSource::kNone);
  EXPECT_EQ(kvc::ruler_task_source("niah_single_2"), kvc::RulerSource::kEssay);
  EXPECT_EQ(kvc::ruler_task_source("niah_multikey_2"), kvc::RulerSource::kNone);
  EXPECT_EQ(kvc::ruler_task_source("qa_1"), kvc::RulerSource::kSquad);
  EXPECT_EQ(kvc::ruler_task_source("qa_2"), kvc::RulerSource::kHotpotQa);
  EXPECT_NE(error_of([] { make("niah_single", 500); }).find("valid: niah_single_1"), std::string::npos);
}

TEST(RulerTasks, EveryTaskFitsItsBudgetAndComesClose) {
  for (const auto& task : kvc::ruler_task_names()) {
    for (size_t budget : {700u, 5000u}) {
      const kvc::TaskSample sample = make(task, budget);
      const size_t words = count_words(sample.context);
      EXPECT_LE(words, budget) << task;
      // One more unit of haystack would not fit: a noise line (19 words), a needle, a word, a document.
      EXPECT_GE(words + 80, budget) << task << " at " << budget;
      EXPECT_FALSE(sample.answers.empty()) << task;
      EXPECT_EQ(sample.metric, starts_with(task, "qa_") ? "string_match_part" : "string_match_all") << task;
      for (const auto& answer : sample.answers) EXPECT_NE(sample.context.find(answer), std::string::npos) << task;
    }
  }
}

TEST(RulerTasks, SameSeedSameSampleOtherSeedOtherSample) {
  for (const auto& task : kvc::ruler_task_names()) {
    const auto a = make(task, 800, 7), b = make(task, 800, 7), c = make(task, 800, 8);
    EXPECT_EQ(a.context, b.context) << task;
    EXPECT_EQ(a.answers, b.answers) << task;
    EXPECT_NE(a.context, c.context) << task;
  }
}

TEST(RulerTasks, TooSmallBudgetsAreOneLineErrors) {
  EXPECT_NE(error_of([] { make("niah_single_1", 10); }).find("niah_single_1: a context of 10 tokens is too small"),
            std::string::npos);
  EXPECT_NE(error_of([] { make("fwe", 150); }).find("fwe: a context of 150 tokens is too small"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------------
// niah

struct Needle {
  std::string key, value;
};

std::vector<Needle> needles_in(const std::string& text, const std::string& type) {
  const std::regex pattern("One of the special magic " + type + " for (\\S+) is: (\\S+)\\.");
  std::vector<Needle> out;
  for (std::sregex_iterator it(text.begin(), text.end(), pattern), end; it != end; ++it)
    out.push_back({(*it)[1], (*it)[2]});
  return out;
}

const std::regex kUuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
const std::regex kNumber("[1-9][0-9]{6}");
const std::regex kWordKey("[a-z]+-[a-z]+");

TEST(RulerNiah, SingleNeedleTemplatesAreRulersSingularForm) {
  const auto sample = make("niah_single_1", 600);
  const auto needles = needles_in(sample.context, "numbers");
  ASSERT_EQ(needles.size(), 1u);
  const std::string key = needles[0].key;
  EXPECT_TRUE(starts_with(sample.context,
                          "A special magic number is hidden within the following text. Make sure to "
                          "memorize it. I will quiz you about the number afterwards.\n"));
  EXPECT_EQ(sample.question, "\nWhat is the special magic number for " + key + " mentioned in the provided text?");
  EXPECT_EQ(sample.answer_prefix, " The special magic number for " + key + " mentioned in the provided text is");
  EXPECT_EQ(sample.answers, std::vector<std::string>{needles[0].value});
  EXPECT_TRUE(std::regex_match(key, kWordKey));
  EXPECT_TRUE(std::regex_match(needles[0].value, kNumber));

  const auto uuid_sample = make("niah_single_3", 600);
  EXPECT_TRUE(starts_with(uuid_sample.context, "A special magic uuid is hidden"));
  EXPECT_TRUE(std::regex_match(uuid_sample.answers.at(0), kUuid));
  EXPECT_EQ(needles_in(uuid_sample.context, "uuids").size(), 1u);  // the needle keeps the plural type
}

TEST(RulerNiah, NoiseHaystackIsRulersFiveSentencesPerLine) {
  const auto sample = make("niah_single_1", 900);
  std::istringstream lines(sample.context.substr(sample.context.find('\n') + 1));
  size_t noise = 0, needles = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line == "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.") ++noise;
    else if (starts_with(line, "One of the special magic numbers for ")) ++needles;
    else ADD_FAILURE() << "unexpected line: " << line;
  }
  EXPECT_EQ(needles, 1u);
  EXPECT_GE(noise, 40u);
}

TEST(RulerNiah, NeedlesAnswersAndQueriesFollowSyntheticYaml) {
  struct Expect {
    const char* task;
    const char* type;
    size_t needles;  // in the context: keys x values (the needle haystack adds its own)
    size_t answers;
    bool plural;
  };
  for (const Expect& e :
       {Expect{"niah_single_2", "numbers", 1, 1, false}, Expect{"niah_multikey_1", "numbers", 4, 1, false},
        Expect{"niah_multivalue", "numbers", 4, 4, true}, Expect{"niah_multiquery", "numbers", 4, 4, true}}) {
    const auto sample = make(e.task, 3000);
    const auto needles = needles_in(sample.context, e.type);
    EXPECT_EQ(needles.size(), e.needles) << e.task;
    EXPECT_EQ(sample.answers.size(), e.answers) << e.task;
    for (const auto& answer : sample.answers) EXPECT_EQ(occurrences(sample.context, answer), 1u) << e.task;
    std::set<std::string> keys;
    for (const auto& needle : needles) keys.insert(needle.key);
    EXPECT_EQ(keys.size(), std::string(e.task) == "niah_multivalue" ? 1u : needles.size()) << e.task;
    // Essay haystack: no newlines inside the data, needles between sentences.
    EXPECT_EQ(sample.context.find('\n'), sample.context.find("afterwards.\n") + 11) << e.task;
    EXPECT_EQ(occurrences(sample.context, "\n"), 1u) << e.task;
    EXPECT_EQ(starts_with(sample.context, "Some special magic numbers are hidden"), e.plural) << e.task;
  }
  // Multi-query asks "a, b, c, and d" and every asked key's value is an answer.
  const auto sample = make("niah_multiquery", 3000);
  const std::regex query(
      "\nWhat are all the special magic numbers for (\\S+), (\\S+), (\\S+), and (\\S+) mentioned in "
      "the provided text\\?");
  std::smatch match;
  ASSERT_TRUE(std::regex_match(sample.question, match, query)) << sample.question;
  std::map<std::string, std::string> value_of;
  for (const auto& needle : needles_in(sample.context, "numbers")) value_of[needle.key] = needle.value;
  for (int i = 1; i <= 4; ++i) EXPECT_EQ(sample.answers.at(i - 1), value_of.at(match[i]));
  EXPECT_EQ(sample.answer_prefix.substr(0, 30), " The special magic numbers for");
  EXPECT_EQ(sample.answer_prefix.substr(sample.answer_prefix.size() - 4), " are");
}

TEST(RulerNiah, NeedleHaystackIsMadeOfOtherNeedles) {
  for (const char* task : {"niah_multikey_2", "niah_multikey_3"}) {
    const auto sample = make(task, 2000);
    const bool uuids = std::string(task) == "niah_multikey_3";
    const auto needles = needles_in(sample.context, uuids ? "uuids" : "numbers");
    EXPECT_GT(needles.size(), 50u) << task;
    EXPECT_EQ(occurrences(sample.context, "\n"), needles.size()) << task;  // head's newline + one per line break
    ASSERT_EQ(sample.answers.size(), 1u);
    const std::string asked = sample.question.substr(
        sample.question.find(" for ") + 5, sample.question.find(" mentioned") - sample.question.find(" for ") - 5);
    size_t asked_needles = 0;
    for (const auto& needle : needles) {
      EXPECT_TRUE(std::regex_match(needle.key, uuids ? kUuid : kWordKey)) << needle.key;
      EXPECT_TRUE(std::regex_match(needle.value, uuids ? kUuid : kNumber)) << needle.value;
      if (needle.key == asked) {
        ++asked_needles;
        EXPECT_EQ(needle.value, sample.answers[0]);
      }
    }
    EXPECT_EQ(asked_needles, 1u) << task;
  }
}

TEST(RulerNiah, EssayNeedlesSitAtRulersDepths) {
  // With four needles the sentence positions are int(n * depth / 100) for four of the forty depths.
  const auto sample = make("niah_multivalue", 4000, 3);
  const std::string data = sample.context.substr(sample.context.find('\n') + 1);
  size_t before = 0;
  for (const auto& sentence : kvc::split_sentences(data)) {
    if (starts_with(sentence, "One of the special magic")) break;
    ++before;
  }
  const auto sentences = kvc::split_sentences(data).size() - 4;
  bool at_a_depth = false;
  for (int k = 0; k < 40; ++k) {
    const int depth = static_cast<int>(std::lround(100.0 * k / 39.0));
    at_a_depth |= static_cast<size_t>(sentences * (depth / 100.0)) == before;
  }
  EXPECT_TRUE(at_a_depth) << before << " of " << sentences;
}

// ---------------------------------------------------------------------------------------------------
// vt

TEST(RulerVt, OneChainOfFourHopsAfterAWorkedExample) {
  const auto sample = make("vt", 1500, 5);
  ASSERT_EQ(sample.answers.size(), 5u);
  const std::string head = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  EXPECT_TRUE(starts_with(sample.context, head));
  EXPECT_EQ(occurrences(sample.context, head), 2u);  // the worked example's and the task's
  const size_t task_start = sample.context.rfind(head);
  const std::string example = sample.context.substr(0, task_start), task = sample.context.substr(task_start);

  // The example ends with its own question, answer prefix, answer and a blank line.
  const std::regex example_end(
      "\nQuestion: Find all variables that are assigned the value (\\d{5}) in the text above\\. Answer: According to "
      "the chain\\(s\\) of variable assignment in the text above, 5 variables are assigned the value \\1, they are:  "
      "([A-Z]{3}) ([A-Z]{3}) ([A-Z]{3}) ([A-Z]{3}) ([A-Z]{3})\n\n$");
  EXPECT_TRUE(std::regex_search(example, example_end)) << example.substr(example.size() - 300);

  // The chain: "VAR A = value", then "VAR B = VAR A " ... on lines of their own, in order.
  std::istringstream lines(task.substr(head.size()));
  std::vector<std::string> statements;
  for (std::string line; std::getline(lines, line);) {
    if (starts_with(line, "VAR ")) statements.push_back(line);
    else EXPECT_EQ(line, "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.");
  }
  ASSERT_EQ(statements.size(), 5u);
  std::smatch match;
  ASSERT_TRUE(std::regex_match(statements[0], match, std::regex("VAR ([A-Z]{5}) = (\\d{5})")));
  EXPECT_EQ(match[1], sample.answers[0]);
  const std::string value = match[2];
  for (size_t i = 1; i < 5; ++i)
    EXPECT_EQ(statements[i], "VAR " + sample.answers[i] + " = VAR " + sample.answers[i - 1] + " ");
  EXPECT_EQ(sample.question,
            "\nQuestion: Find all variables that are assigned the value " + value + " in the text above.");
  EXPECT_EQ(sample.answer_prefix,
            " Answer: According to the chain(s) of variable assignment in the text above, 5 "
            "variables are assigned the value " +
                value + ", they are: ");
}

// ---------------------------------------------------------------------------------------------------
// cwe and fwe

std::map<std::string, size_t> numbered_word_counts(const std::string& list) {
  std::map<std::string, size_t> counts;
  std::istringstream in(list);
  size_t expected_number = 1;
  for (std::string number, word; in >> number >> word; ++expected_number) {
    EXPECT_EQ(number, std::to_string(expected_number) + ".");
    ++counts[word];
  }
  return counts;
}

TEST(RulerCwe, CommonWordsRepeatAsRulersFrequenciesSay) {
  const std::string head =
      "Below is a numbered list of words. In these words, some appear more often than others. "
      "Memorize the ones that appear most often.\n";
  // Short contexts: 6 and 1 (example 3 and 1); from RULER's 4K on: 30 and 3 (example 10 and 3).
  for (const auto& [budget, common, uncommon] :
       std::vector<std::tuple<size_t, size_t, size_t>>{{1500, 6, 1}, {9000, 30, 3}}) {
    const auto sample = make("cwe", budget, 2);
    ASSERT_EQ(occurrences(sample.context, head), 2u);
    const std::string list = sample.context.substr(sample.context.rfind(head) + head.size());
    const auto counts = numbered_word_counts(list);
    ASSERT_EQ(sample.answers.size(), 10u);
    for (const auto& [word, count] : counts) {
      const bool is_common = std::count(sample.answers.begin(), sample.answers.end(), word) == 1;
      EXPECT_EQ(count, is_common ? common : uncommon) << word << " at " << budget;
    }
    for (const auto& answer : sample.answers) EXPECT_EQ(counts.count(answer), 1u) << answer;
    EXPECT_EQ(sample.question, "\nQuestion: What are the 10 most common words in the above list?");
    EXPECT_EQ(sample.answer_prefix, " Answer: The top 10 words that appear most often in the list are:");
    // The worked example closes with its answer list and a newline.
    const std::string example = sample.context.substr(0, sample.context.rfind(head));
    EXPECT_TRUE(std::regex_search(example, std::regex("in the list are: 1\\. \\S+ 2\\. \\S+ .* 10\\. \\S+\n$")));
    const auto example_counts =
        numbered_word_counts(example.substr(head.size(), example.find("\nQuestion:") - head.size()));
    EXPECT_EQ(example_counts.size(), budget < 3584 ? 20u : 40u);
  }
}

TEST(RulerFwe, ZipfCountsWithDotsOnTopAndThreeAnswers) {
  const auto sample = make("fwe", 3000, 4);
  const std::string head =
      "Read the following coded text and track the frequency of each coded word. Find the three "
      "most frequently appeared coded words. ";
  ASSERT_TRUE(starts_with(sample.context, head));
  std::map<std::string, size_t> counts;
  std::istringstream in(sample.context.substr(head.size()));
  for (std::string word; in >> word;) ++counts[word];
  EXPECT_LE(counts.size(), 3000u / 50);
  ASSERT_EQ(sample.answers.size(), 3u);
  // Rank k occurs int(n / (k^2 zeta(2))) times: "..." is rank 1, the answers ranks 2..4.
  const double n = std::floor(counts.at("...") * 1.6449340668482264);
  const size_t top = counts.at("...");
  for (size_t k = 2; k <= 4; ++k) {
    const size_t count = counts.at(sample.answers[k - 2]);
    EXPECT_NEAR(static_cast<double>(count), static_cast<double>(top) / (k * k), 1.0 + top * 0.01) << k;
  }
  for (const auto& [word, count] : counts) {
    if (word == "..." || std::count(sample.answers.begin(), sample.answers.end(), word)) continue;
    EXPECT_LT(count, counts.at(sample.answers[2])) << word;
    EXPECT_TRUE(std::regex_match(word, std::regex("[a-z]{6}"))) << word;
  }
  EXPECT_GT(n, 27);
  EXPECT_EQ(sample.question,
            "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the "
            "three most frequently appeared words in the above coded text?");
  EXPECT_EQ(sample.answer_prefix,
            " Answer: According to the coded text above, the three most frequently appeared words are:");
}

// ---------------------------------------------------------------------------------------------------
// qa

TEST(RulerQa, ReadsTheDataSetsAsQaPyDoes) {
  const auto& squad = *inputs().squad;
  EXPECT_EQ(squad.documents.size(), 5u);
  ASSERT_EQ(squad.questions.size(), 5u);  // the impossible question is left out
  EXPECT_EQ(squad.questions[0].question, "Who first charted Lake Orvane?");
  EXPECT_EQ(squad.questions[0].answers, (std::vector<std::string>{"Mira Halden", "the surveyor Mira Halden"}));
  EXPECT_EQ(squad.questions[0].nearby_documents.size(), 2u);  // the article's other paragraphs
  EXPECT_TRUE(std::is_sorted(squad.documents.begin(), squad.documents.end()));
  const auto& hotpot = *inputs().hotpotqa;
  EXPECT_EQ(hotpot.documents.size(), 9u);  // "title\nsentences", repeated ones once
  ASSERT_EQ(hotpot.questions.size(), 3u);
  EXPECT_EQ(hotpot.questions[0].gold_documents.size(), 4u);
  EXPECT_EQ(hotpot.documents[hotpot.questions[0].gold_documents[0]],
            "Mira Halden\nMira Halden was a surveyor born in the village of Orvane. She charted several lakes.");
}

TEST(RulerQa, DocumentsAreNumberedAndHoldTheGoldOnes) {
  for (const char* task : {"qa_1", "qa_2"}) {
    const auto& data = std::string(task) == "qa_1" ? *inputs().squad : *inputs().hotpotqa;
    for (size_t index : {0u, 2u}) {
      const auto sample = make(task, 250, 9, index);
      const auto& question = data.questions[index];
      EXPECT_EQ(sample.answers, question.answers);
      EXPECT_EQ(sample.question,
                "\n\nAnswer the question based on the given documents. Only give me the answer and do not "
                "output any other words.\n\nQuestion: " +
                    question.question);
      EXPECT_EQ(sample.answer_prefix, " Answer:");
      EXPECT_TRUE(starts_with(sample.context,
                              "Answer the question based on the given documents. Only give me the answer "
                              "and do not output any other words.\n\nThe following are given documents.\n\n"
                              "Document 1:\n"));
      for (size_t gold : question.gold_documents)
        EXPECT_GE(occurrences(sample.context, data.documents[gold]), 1u) << task;
      const size_t documents = occurrences(sample.context, "Document ");
      EXPECT_NE(sample.context.find("\n\nDocument " + std::to_string(documents) + ":\n"), std::string::npos) << task;
    }
  }
}

TEST(RulerQa, MissingDataSetNamesTheFileAndWhereToGetIt) {
  const std::string message = error_of([] { kvc::load_ruler_qa("/nonexistent", "qa_2"); });
  EXPECT_NE(message.find("/nonexistent/hotpotqa.json is missing"), std::string::npos) << message;
  EXPECT_NE(message.find("download_qa_dataset.sh"), std::string::npos) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
  EXPECT_NE(error_of([] { make("qa_1", 500, 1, 99); }).find("the data set has 5"), std::string::npos);
}

}  // namespace
