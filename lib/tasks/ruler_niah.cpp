// RULER's needle-in-a-haystack tasks (scripts/data/synthetic/niah.py with synthetic.yaml's settings).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "tasks/ruler_common.h"
#include "tasks/ruler_generators.h"
#include "tasks/text_template.h"
#include "tasks/token_budget.h"
#include "tasks/word_lists.h"
#include "util/error.h"

namespace kvc {

namespace {

const char* type_name(RulerValue type) {
  switch (type) {
    case RulerValue::kWords: return "words";
    case RulerValue::kNumbers: return "numbers";
    case RulerValue::kUuids: return "uuids";
  }
  return "";
}

// RULER's keys of type words are "adjective-noun" from wonderwords' lists (about 1.5 million pairs);
// kvc uses its own lists (word_lists.h, some 8,000 pairs), since it cannot ship wonderwords' files.
const std::vector<std::string>& word_keys() {
  static const std::vector<std::string> pairs = adjective_noun_pairs("-");
  return pairs;
}

std::string draw(RulerValue type, TaskRng& rng) {
  switch (type) {
    case RulerValue::kWords: return rng.pick(word_keys());
    case RulerValue::kNumbers: return rng.digits(7);  // random.randint(10**6, 10**7 - 1)
    case RulerValue::kUuids: return random_uuid(rng);
  }
  return "";
}

std::string needle_sentence(const RulerNiahConfig& config, const std::string& key, const std::string& value) {
  return fmt::format("One of the special magic {} for {} is: {}.", type_name(config.value), key, value);
}

// The needles of the "needle" haystack, drawn on demand from one stream so that a longer haystack starts
// with the same ones. Their keys never repeat a real needle's key: with kvc's smaller word list a
// repeated key would otherwise make the question ambiguous far more often than in RULER.
class NeedleHaystack {
 public:
  NeedleHaystack(const RulerNiahConfig& config, uint64_t seed, std::set<std::string> reserved_keys)
      : config_(config), rng_(seed, "ruler_niah/haystack"), reserved_(std::move(reserved_keys)) {}

  const std::string& operator[](size_t index) {
    while (sentences_.size() <= index) {
      std::string key = draw(config_.key, rng_);
      while (reserved_.count(key) != 0) key = draw(config_.key, rng_);
      sentences_.push_back(needle_sentence(config_, key, draw(config_.value, rng_)));
    }
    return sentences_[index];
  }

 private:
  const RulerNiahConfig& config_;
  TaskRng rng_;
  std::set<std::string> reserved_;
  std::vector<std::string> sentences_;
};

// niah.py's template with its singular form when one value is asked: "Some"->"A", "are all"->"is",
// "are"->"is", "answers"->"answer" and the value type without its "s".
RulerPrompt niah_prompt(const RulerNiahConfig& config, const std::string& query) {
  RulerPrompt prompt{
      "Some special magic {type_needle_v} are hidden within the following text. Make sure to memorize it. I will "
      "quiz you about the {type_needle_v} afterwards.\n",
      "\nWhat are all the special magic {type_needle_v} for {query} mentioned in the provided text?",
      " The special magic {type_needle_v} for {query} mentioned in the provided text are"};
  std::string type = type_name(config.value);
  if (config.queries * config.values == 1) {
    for (std::string* part : {&prompt.head, &prompt.tail, &prompt.answer_prefix}) {
      *part = replace_all(replace_all(replace_all(replace_all(*part, "Some", "A"), "are all", "is"), "are", "is"),
                          "answers", "answer");
    }
    type.pop_back();
  }
  for (std::string* part : {&prompt.head, &prompt.tail, &prompt.answer_prefix}) {
    *part = fill_placeholders(*part, {{"type_needle_v", type}, {"query", query}});
  }
  return prompt;
}

}  // namespace

TaskSample make_ruler_niah(const RulerNiahConfig& config, const RulerRequest& request, const TokenCounter& counter,
                           const std::string& essay) {
  TaskRng rng(request.seed, std::string("ruler_niah/") + config.task);
  const size_t key_count = std::max(config.keys, config.queries);
  std::vector<std::string> keys;
  std::vector<std::vector<std::string>> values(key_count);
  std::vector<std::string> needles;
  std::set<std::string> used_keys;
  for (size_t k = 0; k < key_count; ++k) {
    std::string key = draw(config.key, rng);
    while (!used_keys.insert(key).second) key = draw(config.key, rng);
    keys.push_back(key);
    for (size_t v = 0; v < config.values; ++v) {
      values[k].push_back(draw(config.value, rng));
      needles.push_back(needle_sentence(config, key, values[k].back()));
    }
  }
  rng.shuffle(needles);

  std::vector<std::string> queries;
  std::vector<std::string> answers;
  for (size_t index : sample_indices(rng, key_count, config.queries)) {
    queries.push_back(keys[index]);
    answers.insert(answers.end(), values[index].begin(), values[index].end());
  }
  const std::string query =
      queries.size() == 1
          ? queries.front()
          : fmt::format("{}, and {}", fmt::join(queries.begin(), queries.end() - 1, ", "), queries.back());

  std::vector<int> depths;  // essay: random.sample(DEPTHS, needles)
  for (size_t index : sample_indices(rng, ruler_depths().size(), needles.size()))
    depths.push_back(ruler_depths()[index]);
  const std::vector<std::string> words =
      config.haystack == RulerHaystack::kEssay ? essay_words(essay) : std::vector<std::string>{};
  NeedleHaystack needle_haystack(config, request.seed, used_keys);
  const RulerPrompt prompt = niah_prompt(config, query);

  // Noise and needle haystacks: `count` sentences, the needles inserted at random.sample(range(count))
  // positions taken from the highest down, lines joined by newlines.
  const auto data = [&](size_t count) {
    if (config.haystack == RulerHaystack::kEssay) return essay_with_insertions(words, count, depths, needles);
    std::vector<std::string> lines;
    for (size_t i = 0; i < count; ++i)
      lines.push_back(config.haystack == RulerHaystack::kNoise ? kRulerNoise : needle_haystack[i]);
    TaskRng place(request.seed, fmt::format("ruler_niah/positions/{}", count));
    std::vector<size_t> positions = sample_indices(place, std::max(count, needles.size()), needles.size());
    std::sort(positions.rbegin(), positions.rend());
    for (size_t i = 0; i < needles.size(); ++i) {
      lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(std::min(positions[i], lines.size())), needles[i]);
    }
    return fmt::format("{}", fmt::join(lines, "\n"));
  };
  const auto build = [&](size_t count) { return prompt.head + data(count); };
  const size_t count = fit_to_budget(config.task, request.context_tokens, request.context_tokens, counter, build);

  TaskSample sample = ruler_sample(config.task, request, prompt, data(count));
  sample.answers = answers;
  return sample;
}

}  // namespace kvc
