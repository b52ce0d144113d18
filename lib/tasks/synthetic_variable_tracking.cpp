// RULER's variable tracking: follow chains of assignments through filler text.
#include <algorithm>
#include <set>

#include "tasks/haystack.h"
#include "tasks/synthetic.h"
#include "tasks/synthetic_common.h"
#include "tasks/task_random.h"
#include "tasks/token_budget.h"

namespace kvc {

namespace {

constexpr size_t kChains = 2;  // the first is asked; the second is a distractor with another value
constexpr size_t kHops = 4;    // assignments after the first, so each chain names kHops + 1 variables

}  // namespace

TaskSample variable_tracking(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                             const std::string& haystack) {
  const std::vector<std::string> sentences = filler_sentences(haystack);
  TaskRng rng(seed, "variable_tracking");

  std::set<std::string> used_names, used_values;
  std::vector<std::vector<std::string>> statements(kChains);
  std::vector<std::string> values, asked_chain;
  for (size_t chain = 0; chain < kChains; ++chain) {
    std::string value = rng.digits(5);
    while (!used_values.insert(value).second) value = rng.digits(5);
    values.push_back(value);
    std::string previous;
    for (size_t hop = 0; hop <= kHops; ++hop) {
      std::string name = rng.letters(5, 'A');
      while (!used_names.insert(name).second) name = rng.letters(5, 'A');
      statements[chain].push_back(hop == 0 ? fmt::format("VAR {} = {}.", name, value)
                                           : fmt::format("VAR {} = VAR {}.", name, previous));
      if (chain == 0) asked_chain.push_back(name);
      previous = name;
    }
  }

  // Interleave the chains at random, each in its own order, and spread them over the filler at sorted
  // random depths so that every assignment comes after the one it reads.
  std::vector<double> depths(kChains * (kHops + 1));
  for (double& depth : depths) depth = rng.unit();
  std::sort(depths.begin(), depths.end());
  std::vector<size_t> next_in_chain(kChains, 0);
  std::vector<Insertion> insertions;
  while (insertions.size() < depths.size()) {
    const size_t chain = rng.below(kChains);
    if (next_in_chain[chain] > kHops) continue;
    insertions.push_back({depths[insertions.size()], statements[chain][next_in_chain[chain]++]});
  }

  const std::string instruction =
      "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  const auto build = [&](size_t count) { return instruction + assemble_haystack(sentences, count, insertions).text; };

  TaskSample sample = synthetic_sample("variable_tracking", context_tokens, seed);
  sample.context = build(fit_to_budget("variable_tracking", context_tokens, context_tokens, counter, build));
  sample.question =
      fmt::format("\nQuestion: Find all variables that are assigned the value {} in the text above.", values.front());
  sample.answer_prefix = fmt::format(
      " Answer: According to the chain(s) of variable assignment in the text above, {} variables are assigned the "
      "value {}, they are:",
      asked_chain.size(), values.front());
  sample.answers = asked_chain;
  return sample;
}

}  // namespace kvc
