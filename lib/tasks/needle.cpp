#include "tasks/needle.h"

#include <fmt/format.h>

#include <map>

#include "tasks/task_random.h"
#include "tasks/text_template.h"
#include "tasks/token_budget.h"
#include "util/error.h"

namespace kvc {

NeedleSpec passkey_needle_spec() {
  NeedleSpec spec;
  spec.needle_template = "The pass key is {number}. Remember it. {number} is the pass key.";
  spec.question_template = "What is the pass key? The pass key is";
  return spec;
}

NeedleSpec plain_needle_spec() {
  NeedleSpec spec;
  spec.needle_template = "The special magic number is {number}.";
  spec.question_template = "What is the special magic number in the text above? Answer with the number only.";
  return spec;
}

NeedleSpec needle_spec_named(const std::string& name) {
  if (name == "passkey") return passkey_needle_spec();
  if (name == "plain") return plain_needle_spec();
  KVC_CHECK(name == "secret", "--templates: unknown set '{}' (use secret, passkey or plain)", name);
  return NeedleSpec{};
}

NeedleSample make_needle_sample(const NeedleSpec& spec, const std::string& haystack_text, size_t context_tokens,
                                double depth_fraction, uint64_t seed, const TokenCounter& counter) {
  KVC_CHECK(depth_fraction >= 0.0 && depth_fraction <= 1.0, "needle depth {} is outside [0, 1]", depth_fraction);
  KVC_CHECK(spec.digits >= 1, "needle numbers need at least one digit, got {}", spec.digits);
  const bool wants_entity = spec.needle_template.find("{entity}") != std::string::npos ||
                            spec.question_template.find("{entity}") != std::string::npos;
  KVC_CHECK(!wants_entity || !spec.entities.empty(), "the needle templates use {{entity}} but no entities are given");
  const std::vector<std::string> sentences = filler_sentences(haystack_text);

  TaskRng rng(seed, "needle");
  const std::string entity = wants_entity ? rng.pick(spec.entities) : "";
  const std::string number = rng.digits(spec.digits);
  const std::map<std::string, std::string> values = {{"entity", entity}, {"number", number}};
  const std::vector<Insertion> needle = {{depth_fraction, fill_placeholders(spec.needle_template, values)}};

  const auto build = [&](size_t count) { return assemble_haystack(sentences, count, needle).text; };
  const size_t count = fit_to_budget("needle", context_tokens, context_tokens, counter, build);
  const AssembledText assembled = assemble_haystack(sentences, count, needle);

  NeedleSample sample;
  sample.id = fmt::format("needle-{}tok-depth{:.2f}-seed{}", context_tokens, depth_fraction, seed);
  sample.context = assembled.text;
  sample.question = "\n" + fill_placeholders(spec.question_template, values);
  sample.answers = {number};
  sample.metric = "contains";
  sample.needle = needle.front().text;
  sample.needle_offset = assembled.offsets.front();
  const double before = static_cast<double>(counter(sample.context.substr(0, sample.needle_offset)));
  const double after = static_cast<double>(counter(sample.context.substr(sample.needle_offset + sample.needle.size())));
  sample.depth = before + after > 0 ? before / (before + after) : 0.0;
  return sample;
}

}  // namespace kvc
