#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "tasks/synthetic.h"
#include "util/error.h"

namespace kvc {

namespace {

using Generator = TaskSample (*)(size_t, uint64_t, const TokenCounter&, const std::string&);

struct NamedGenerator {
  const char* name;
  Generator generate;
};

const std::vector<NamedGenerator>& registry() {
  static const std::vector<NamedGenerator> generators = {
      {"niah_single", niah_single},
      {"niah_multikey", niah_multikey},
      {"niah_multivalue", niah_multivalue},
      {"niah_multiquery", niah_multiquery},
      {"variable_tracking", variable_tracking},
      {"common_words", common_words},
      {"frequent_words", frequent_words},
  };
  return generators;
}

}  // namespace

const std::vector<std::string>& synthetic_task_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& generator : registry()) out.emplace_back(generator.name);
    return out;
  }();
  return names;
}

TaskSample make_synthetic_sample(const std::string& name, size_t context_tokens, uint64_t seed,
                                 const TokenCounter& counter, const std::string& haystack) {
  const auto& generators = registry();
  auto it = std::find_if(generators.begin(), generators.end(),
                         [&](const NamedGenerator& generator) { return name == generator.name; });
  KVC_CHECK(it != generators.end(), "unknown synthetic task '{}' (valid: {})", name,
            fmt::join(synthetic_task_names(), ", "));
  return it->generate(context_tokens, seed, counter, haystack);
}

}  // namespace kvc
