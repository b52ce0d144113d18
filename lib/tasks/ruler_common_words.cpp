// RULER's cwe (scripts/data/synthetic/common_words_extraction.py: ten words 30 times, the others 3 times,
// in a numbered list, after one worked example).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "tasks/ruler_common.h"
#include "tasks/ruler_generators.h"
#include "tasks/token_budget.h"
#include "tasks/word_lists.h"

namespace kvc {

namespace {

constexpr size_t kCommonWords = 10;  // num_cw

struct Repeats {
  size_t common, uncommon;
};

// RULER takes other frequencies below max_seq_length 4096: 6 and 1 (example: 20 words, 3 and 1), else
// 30 and 3 (example: 40 words, 10 and 3). kvc's budget is the context alone, so the long form starts
// where a 4096-token RULER prompt's context would, allowing for the question and the tokens to generate.
constexpr size_t kLongFormContextTokens = 3584;

struct Form {
  size_t example_words;
  Repeats example, task;
};

Form form_for(size_t context_tokens) {
  if (context_tokens < kLongFormContextTokens) return {20, {3, 1}, {6, 1}};
  return {40, {10, 3}, {30, 3}};
}

// RULER draws from wonderwords' nouns, adjectives and verbs (some 4,000 words), or, for more words than
// that, from english_words.json. kvc cannot ship those lists: it draws from its own English words
// (word_lists.h) and, for more words than they hold, from made-up words of three consonant-vowel
// syllables ("talemo"), all six letters long so that none is a substring of another.
// The first `count` of one random order, so that a longer list keeps a shorter one's words and the
// token count grows steadily with the number of words.
std::vector<std::string> draw_words(TaskRng& rng, size_t count) {
  static const std::vector<std::string> english = [] {
    std::vector<std::string> words = english_nouns();
    words.insert(words.end(), english_adjectives().begin(), english_adjectives().end());
    std::sort(words.begin(), words.end());
    words.erase(std::unique(words.begin(), words.end()), words.end());
    return words;
  }();
  std::vector<std::string> out;
  if (count <= english.size()) {
    out = english;
    rng.shuffle(out);
    out.resize(count);
    return out;
  }
  static const std::string consonants = "bdfgklmnprstvz", vowels = "aeiou";
  std::set<std::string> seen;
  while (out.size() < count) {
    std::string word;
    for (int syllable = 0; syllable < 3; ++syllable) {
      word += consonants[rng.below(consonants.size())];
      word += vowels[rng.below(vowels.size())];
    }
    if (seen.insert(word).second) out.push_back(word);
  }
  return out;
}

std::string numbered(const std::vector<std::string>& words) {
  std::vector<std::string> entries;
  for (size_t i = 0; i < words.size(); ++i) entries.push_back(fmt::format("{}. {}", i + 1, words[i]));
  return fmt::format("{}", fmt::join(entries, " "));
}

struct WordList {
  std::string text;                 // "1. w 2. w ..."
  std::vector<std::string> common;  // the first kCommonWords drawn
};

// get_example: `count` distinct words, the first ten repeated `repeats.common` times, the rest
// `repeats.uncommon` times, shuffled (each count in its own order).
WordList word_list(uint64_t seed, const std::string& stream, size_t count, Repeats repeats) {
  TaskRng words_rng(seed, stream);
  const std::vector<std::string> words = draw_words(words_rng, count);
  TaskRng rng(seed, fmt::format("{}/order/{}", stream, count));
  std::vector<std::string> entries;
  for (size_t r = 0; r < repeats.common; ++r)
    entries.insert(entries.end(), words.begin(), words.begin() + kCommonWords);
  for (size_t r = 0; r < repeats.uncommon; ++r)
    entries.insert(entries.end(), words.begin() + kCommonWords, words.end());
  rng.shuffle(entries);
  return {numbered(entries), std::vector<std::string>(words.begin(), words.begin() + kCommonWords)};
}

}  // namespace

TaskSample make_ruler_cwe(const RulerRequest& request, const TokenCounter& counter) {
  const RulerPrompt prompt{
      "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones "
      "that appear most often.\n",
      "\nQuestion: What are the 10 most common words in the above list?",
      " Answer: The top 10 words that appear most often in the list are:"};
  const Form form = form_for(request.context_tokens);
  const WordList example = word_list(request.seed, "ruler_cwe/example", form.example_words, form.example);
  const std::string worked =
      prompt.head + example.text + prompt.tail + prompt.answer_prefix + " " + numbered(example.common) + "\n";

  // The list grows by distinct words (RULER's num_words); each length draws its own words.
  const auto list = [&](size_t extra_words) {
    return word_list(request.seed, "ruler_cwe/words", kCommonWords + extra_words, form.task);
  };
  RulerPrompt task_prompt = prompt;
  task_prompt.head = worked + prompt.head;
  // Below RULER's lengths a small tokenizer may not hold the example and the shortest list together; the
  // task then goes without the example rather than not at all.
  if (counter(task_prompt.head + list(0).text) > request.context_tokens) task_prompt.head = prompt.head;
  const size_t extra = fit_to_budget("cwe", request.context_tokens, request.context_tokens, counter,
                                     [&](size_t n) { return task_prompt.head + list(n).text; });
  const WordList chosen = list(extra);
  TaskSample sample = ruler_sample("cwe", request, task_prompt, chosen.text);
  sample.answers = chosen.common;
  return sample;
}

}  // namespace kvc
