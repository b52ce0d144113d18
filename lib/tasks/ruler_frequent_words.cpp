// RULER's fwe (scripts/data/synthetic/freq_words_extraction.py: coded six-letter words with Zipf
// frequencies, alpha 2; the top-ranked one is "..." noise, the next three are the answer).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <set>

#include "tasks/ruler_common.h"
#include "tasks/ruler_generators.h"
#include "tasks/token_budget.h"
#include "util/error.h"

namespace kvc {

namespace {

constexpr int kCodedWordLength = 6;
constexpr double kZeta2 = 1.6449340668482264;  // scipy.special.zeta(2.0) = pi^2 / 6
constexpr size_t kAnswerWords = 3;
// Below this scale the third answer (rank 4: floor(n / (16 zeta(2)))) would not occur at all.
constexpr size_t kMinimumScale = 27;

}  // namespace

TaskSample make_ruler_fwe(const RulerRequest& request, const TokenCounter& counter) {
  // RULER's vocabulary is (max_seq_length - tokens_to_generate) // 50 words; kvc's budget is the context.
  const size_t vocabulary_size = request.context_tokens / 50;
  KVC_CHECK(vocabulary_size >= kAnswerWords + 1,
            "fwe: a context of {} tokens is too small (its vocabulary is one word per 50 tokens and needs {})",
            request.context_tokens, kAnswerWords + 1);
  TaskRng rng(request.seed, "ruler_fwe");
  std::vector<std::string> vocabulary;
  std::set<std::string> seen;
  while (vocabulary.size() < vocabulary_size) {
    std::string word = rng.letters(kCodedWordLength, 'a');
    if (seen.insert(word).second) vocabulary.push_back(word);
  }
  vocabulary.front() = "...";

  const RulerPrompt prompt{
      "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
      "appeared coded words. ",
      "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
      "appeared words in the above coded text?",
      " Answer: According to the coded text above, the three most frequently appeared words are:"};
  // Word of rank k occurs int(num_words * k**-alpha / zeta(alpha)) times; the text is shuffled.
  const auto coded_text = [&](size_t extra_scale) {
    const double num_words = static_cast<double>(kMinimumScale + extra_scale);
    std::vector<std::string> occurrences;
    for (size_t k = 1; k <= vocabulary.size(); ++k) {
      const auto count = static_cast<size_t>(num_words * std::pow(static_cast<double>(k), -2.0) / kZeta2);
      occurrences.insert(occurrences.end(), count, vocabulary[k - 1]);
    }
    TaskRng order(request.seed, fmt::format("ruler_fwe/order/{}", extra_scale));
    order.shuffle(occurrences);
    return fmt::format("{}", fmt::join(occurrences, " "));
  };
  const size_t extra = fit_to_budget("fwe", 2 * request.context_tokens, request.context_tokens, counter,
                                     [&](size_t n) { return prompt.head + coded_text(n); });
  TaskSample sample = ruler_sample("fwe", request, prompt, coded_text(extra));
  sample.answers.assign(vocabulary.begin() + 1, vocabulary.begin() + 1 + kAnswerWords);
  return sample;
}

}  // namespace kvc
