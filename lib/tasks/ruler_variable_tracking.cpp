// RULER's vt (scripts/data/synthetic/variable_tracking.py: one chain of four hops in the noise haystack,
// after one worked example).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "tasks/ruler_common.h"
#include "tasks/ruler_generators.h"
#include "tasks/token_budget.h"

namespace kvc {

namespace {

constexpr size_t kHops = 4;  // num_hops; the chain names kHops + 1 variables
// RULER fits its worked example into 500 tokens. kvc also runs shorter prompts, where the example may
// take at most a third of the context.
constexpr size_t kExampleTokens = 500;

struct Chain {
  std::vector<std::string> names;
  std::string value;
  std::vector<std::string> statements;  // "VAR A = 12345", then "VAR B = VAR A " (with RULER's trailing space)
};

// Names of `letters` upper-case letters, distinct within the sample, and a value from
// np.random.randint(10000, 99999).
Chain make_chain(TaskRng& rng, int letters, std::set<std::string>& used) {
  Chain chain;
  chain.value = std::to_string(10000 + rng.below(89999));
  for (size_t hop = 0; hop <= kHops; ++hop) {
    std::string name = rng.letters(letters, 'A');
    while (!used.insert(name).second) name = rng.letters(letters, 'A');
    chain.names.push_back(name);
    chain.statements.push_back(hop == 0 ? fmt::format("VAR {} = {}", name, chain.value)
                                        : fmt::format("VAR {} = VAR {} ", name, chain.names[hop - 1]));
  }
  return chain;
}

RulerPrompt vt_prompt(const Chain& chain) {
  return {"Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n",
          fmt::format("\nQuestion: Find all variables that are assigned the value {} in the text above.", chain.value),
          fmt::format(" Answer: According to the chain(s) of variable assignment in the text above, {} variables are "
                      "assigned the value {}, they are: ",
                      chain.names.size(), chain.value)};
}

// `count` noise lines with the chain's statements, in order, at random.sample(range(count)) positions.
std::string noise_with_chain(const Chain& chain, size_t count, uint64_t seed, const std::string& stream) {
  std::vector<std::string> lines(count, kRulerNoise);
  TaskRng place(seed, fmt::format("{}/{}", stream, count));
  std::vector<size_t> positions =
      sample_indices(place, std::max(count, chain.statements.size()), chain.statements.size());
  std::sort(positions.begin(), positions.end());
  for (size_t j = 0; j < positions.size(); ++j) {
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(std::min(positions[j] + j, lines.size())),
                 chain.statements[j]);
  }
  return fmt::format("{}", fmt::join(lines, "\n"));
}

}  // namespace

TaskSample make_ruler_vt(const RulerRequest& request, const TokenCounter& counter) {
  TaskRng rng(request.seed, "ruler_vt");
  std::set<std::string> used;
  // The worked example: three-letter names (RULER's is_icl) and its answer, then a blank line.
  const Chain example = make_chain(rng, 3, used);
  const Chain chain = make_chain(rng, 5, used);
  const RulerPrompt example_prompt = vt_prompt(example);
  const auto example_input = [&](size_t count) {
    return example_prompt.head + noise_with_chain(example, count, request.seed, "ruler_vt/example") +
           example_prompt.tail + example_prompt.answer_prefix;
  };
  const size_t example_budget = std::min(kExampleTokens, request.context_tokens / 3);
  const size_t example_count = largest_fitting(example_budget, example_budget, counter, example_input).value_or(0);
  const std::string worked =
      example_input(example_count) + " " + fmt::format("{}", fmt::join(example.names, " ")) + "\n";

  RulerPrompt prompt = vt_prompt(chain);
  prompt.head = worked + "\n" + prompt.head;
  const auto build = [&](size_t count) {
    return prompt.head + noise_with_chain(chain, count, request.seed, "ruler_vt/noise");
  };
  const size_t count = fit_to_budget("vt", request.context_tokens, request.context_tokens, counter, build);
  TaskSample sample =
      ruler_sample("vt", request, prompt, noise_with_chain(chain, count, request.seed, "ruler_vt/noise"));
  sample.answers = chain.names;
  return sample;
}

}  // namespace kvc
