#pragma once
// Needle in a haystack: one fact ("The secret number of the purple ship is 40721.") placed at a chosen
// depth of filler text, asked after it. The templates are the question forms kvc-micro-lm and kvc-tiny-lm
// were trained on.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/haystack.h"
#include "tasks/task_sample.h"
#include "tasks/word_lists.h"

namespace kvc {

struct NeedleSpec {
  std::string needle_template = "The secret number of the {entity} is {number}.";
  std::string question_template = "What is the secret number of the {entity}? The secret number of the {entity} is";
  std::vector<std::string> entities = adjective_noun_pairs();
  int digits = 5;
};

// "The pass key is {number}. Remember it. {number} is the pass key." / "What is the pass key? The pass key is"
NeedleSpec passkey_needle_spec();
// A question as a user would ask an instruct model, with no answer begun for it:
// "The special magic number is {number}." / "What is the special magic number in the text above? Answer with
// the number only."
NeedleSpec plain_needle_spec();
// --templates: "secret" (the default spec), "passkey" or "plain"; kvc::Error naming --templates otherwise.
NeedleSpec needle_spec_named(const std::string& name);

// A needle sample and where the needle ended up. Slices to a plain TaskSample where that is all one needs.
struct NeedleSample : TaskSample {
  std::string needle;        // the filled needle sentence, found verbatim in `context`
  size_t needle_offset = 0;  // its byte offset in `context`
  double depth = 0.0;        // realised depth: filler tokens before the needle / all filler tokens
};

// `context` is the haystack's sentences from its start (repeated when it is too short) plus the needle,
// as many as keep counter(context) <= context_tokens; the needle sits at the sentence boundary nearest
// to depth_fraction (0 = start, 1 = end). `question` is "\n" + the filled question template; `answers`
// is the number; metric "contains". The seed picks entity and number: one seed, one sample.
// Throws kvc::Error when the needle alone exceeds the budget, when the haystack has no sentences, or
// when a template asks for an entity and `entities` is empty.
NeedleSample make_needle_sample(const NeedleSpec& spec, const std::string& haystack_text, size_t context_tokens,
                                double depth_fraction, uint64_t seed, const TokenCounter& counter);

}  // namespace kvc
