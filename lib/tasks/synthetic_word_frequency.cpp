// RULER's aggregation tasks: common words extraction (cwe) and frequent words extraction (fwe).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <set>

#include "tasks/synthetic.h"
#include "tasks/synthetic_common.h"
#include "tasks/task_random.h"
#include "tasks/token_budget.h"
#include "tasks/word_lists.h"

namespace kvc {

namespace {

// Distinct words drawn on demand from one random stream, so that the first n words are the same however
// many are asked for later.
class Vocabulary {
 public:
  Vocabulary(std::vector<std::string> first_words, uint64_t seed, const std::string& stream)
      : words_(std::move(first_words)), used_(words_.begin(), words_.end()), rng_(seed, stream) {}

  const std::string& operator[](size_t index) {
    while (words_.size() <= index) {
      std::string word = rng_.letters(6, 'a');
      if (used_.insert(word).second) words_.push_back(std::move(word));
    }
    return words_[index];
  }

 private:
  std::vector<std::string> words_;
  std::set<std::string> used_;
  TaskRng rng_;
};

constexpr size_t kCommonWords = 10;

struct Frequencies {
  size_t common, uncommon;
};

// RULER's 30 and 3 occurrences, scaled down for contexts too short to hold them.
constexpr Frequencies kFrequencyLadder[] = {{30, 3}, {10, 2}, {4, 1}};

constexpr size_t kTopFrequentWords = 3;
// With counts floor(scale / rank²) the top three counts are strictly ordered and above the fourth from
// this scale on (18: 18, 4, 2, 1).
constexpr size_t kMinimumZipfScale = 18;

}  // namespace

TaskSample common_words(size_t context_tokens, uint64_t seed, const TokenCounter& counter, const std::string&) {
  std::vector<std::string> english = english_nouns();
  english.insert(english.end(), english_adjectives().begin(), english_adjectives().end());
  TaskRng(seed, "common_words/vocabulary").shuffle(english);
  Vocabulary vocabulary(english, seed, "common_words/coded");

  const std::string instruction =
      "Below is a numbered list of words. In these words, some appear more often than others. "
      "Memorize the ones that appear most often.\n";
  Frequencies frequencies{};
  const auto build = [&](size_t uncommon_words) {
    std::vector<std::string> entries;
    for (size_t w = 0; w < kCommonWords + uncommon_words; ++w) {
      entries.insert(entries.end(), w < kCommonWords ? frequencies.common : frequencies.uncommon, vocabulary[w]);
    }
    TaskRng(seed, "common_words/order").shuffle(entries);
    std::string text = instruction;
    for (size_t i = 0; i < entries.size(); ++i) text += fmt::format("{}{}. {}", i == 0 ? "" : " ", i + 1, entries[i]);
    return text;
  };

  // The most frequent rung that still leaves room for at least as many rare words as common ones.
  size_t uncommon_words = 0;
  for (size_t r = 0; r < std::size(kFrequencyLadder); ++r) {
    frequencies = kFrequencyLadder[r];
    const size_t max_words = context_tokens / frequencies.uncommon;
    if (r + 1 == std::size(kFrequencyLadder)) {
      uncommon_words = fit_to_budget("common_words", max_words, context_tokens, counter, build);
      break;
    }
    const auto fitting = largest_fitting(max_words, context_tokens, counter, build);
    if (fitting && *fitting >= kCommonWords) {
      uncommon_words = *fitting;
      break;
    }
  }

  TaskSample sample = synthetic_sample("common_words", context_tokens, seed);
  sample.context = build(uncommon_words);
  sample.question = fmt::format("\nQuestion: What are the {} most common words in the above list?", kCommonWords);
  sample.answer_prefix = fmt::format(" Answer: The top {} words that appear most often in the list are:", kCommonWords);
  for (size_t w = 0; w < kCommonWords; ++w) sample.answers.push_back(vocabulary[w]);
  return sample;
}

TaskSample frequent_words(size_t context_tokens, uint64_t seed, const TokenCounter& counter, const std::string&) {
  Vocabulary vocabulary({}, seed, "frequent_words/coded");
  const std::string instruction =
      "Read the following coded text and track the frequency of each coded word. "
      "Find the three most frequently appearing coded words.\n";
  const auto build = [&](size_t extra_scale) {
    const size_t scale = kMinimumZipfScale + extra_scale;
    std::vector<std::string> occurrences;
    for (size_t rank = 1; scale / (rank * rank) > 0; ++rank) {
      occurrences.insert(occurrences.end(), scale / (rank * rank), vocabulary[rank - 1]);
    }
    TaskRng(seed, "frequent_words/order").shuffle(occurrences);
    return instruction + fmt::format("{}", fmt::join(occurrences, " "));
  };

  TaskSample sample = synthetic_sample("frequent_words", context_tokens, seed);
  sample.context = build(fit_to_budget("frequent_words", context_tokens, context_tokens, counter, build));
  sample.question =
      "\nQuestion: Do not provide any explanation. What are the three most frequently appearing words in the above "
      "coded text?";
  sample.answer_prefix = " Answer: According to the coded text above, the three most frequently appearing words are:";
  for (size_t rank = 0; rank < kTopFrequentWords; ++rank) sample.answers.push_back(vocabulary[rank]);
  return sample;
}

}  // namespace kvc
