// The needle-in-a-haystack family of RULER (niah_single / multikey / multivalue / multiquery).
#include <set>

#include "tasks/haystack.h"
#include "tasks/synthetic.h"
#include "tasks/synthetic_common.h"
#include "tasks/task_random.h"
#include "tasks/token_budget.h"
#include "tasks/word_lists.h"

namespace kvc {

namespace {

struct NiahShape {
  const char* task;
  size_t keys;            // distinct keys hidden
  size_t values_per_key;  // facts per key
  size_t asked_keys;      // keys the question asks for (the first ones drawn)
};

TaskSample make_niah(const NiahShape& shape, size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                     const std::string& haystack) {
  const std::vector<std::string> sentences = filler_sentences(haystack);
  TaskRng rng(seed, shape.task);

  std::vector<std::string> key_pool = adjective_noun_pairs("-");
  rng.shuffle(key_pool);
  const std::vector<std::string> keys(key_pool.begin(), key_pool.begin() + shape.keys);

  TaskSample sample = synthetic_sample(shape.task, context_tokens, seed);
  std::vector<Insertion> needles;
  std::set<std::string> used_values;
  for (size_t k = 0; k < keys.size(); ++k) {
    for (size_t v = 0; v < shape.values_per_key; ++v) {
      std::string value = rng.digits(7);
      while (!used_values.insert(value).second) value = rng.digits(7);
      needles.push_back({rng.unit(), fmt::format("One of the special magic numbers for {} is: {}.", keys[k], value)});
      if (k < shape.asked_keys) sample.answers.push_back(value);
    }
  }

  const std::string instruction =
      "Some special magic numbers are hidden within the following text. Make sure to memorize it. "
      "I will quiz you about the numbers afterwards.\n";
  const auto build = [&](size_t count) { return instruction + assemble_haystack(sentences, count, needles).text; };
  sample.context = build(fit_to_budget(shape.task, context_tokens, context_tokens, counter, build));

  const std::string asked = join_with_and(std::vector<std::string>(keys.begin(), keys.begin() + shape.asked_keys));
  sample.question =
      fmt::format("\nWhat are all the special magic numbers for {} mentioned in the provided text?", asked);
  sample.answer_prefix = fmt::format(" The special magic numbers for {} mentioned in the provided text are", asked);
  return sample;
}

}  // namespace

TaskSample niah_single(size_t context_tokens, uint64_t seed, const TokenCounter& counter, const std::string& haystack) {
  return make_niah({"niah_single", 1, 1, 1}, context_tokens, seed, counter, haystack);
}

TaskSample niah_multikey(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                         const std::string& haystack) {
  return make_niah({"niah_multikey", 4, 1, 1}, context_tokens, seed, counter, haystack);
}

TaskSample niah_multivalue(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                           const std::string& haystack) {
  return make_niah({"niah_multivalue", 1, 4, 1}, context_tokens, seed, counter, haystack);
}

TaskSample niah_multiquery(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                           const std::string& haystack) {
  return make_niah({"niah_multiquery", 4, 1, 4}, context_tokens, seed, counter, haystack);
}

}  // namespace kvc
