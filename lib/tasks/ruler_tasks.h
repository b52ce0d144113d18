#pragma once
// RULER's 13 tasks (NVIDIA/RULER scripts/synthetic.yaml) generated as its recipe does: the same prompt
// templates, needle formats, haystacks, key and value types, numbers of needles, queries and values,
// depths, chains, word frequencies, few-shot examples and answer prefixes, scored with RULER's metrics
// (string_match_all, string_match_part; ruler_metrics.h).
//
// Kept kvc's way: the prompt is split into context (RULER's instruction and data, and any few-shot
// example) and question (what follows the data, up to the answer prefix), so that compression can run
// without the question; the context is filled to `context_tokens` by growing the haystack, as RULER's
// search for the haystack size does. Remaining differences from RULER (documented where they arise):
// the RNG (same distributions, other samples), kvc's word lists instead of wonderwords' and
// english_words.json, kvc's sentence splitter instead of nltk's punkt, and lengths that count the
// prompt only (RULER's include the tokens to generate).
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/ruler_qa_data.h"
#include "tasks/task_sample.h"

namespace kvc {

// niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, vt, cwe, fwe, qa_1, qa_2.
const std::vector<std::string>& ruler_task_names();
bool is_ruler_task(const std::string& name);

// What a task needs beyond the seed.
enum class RulerSource { kNone, kEssay, kSquad, kHotpotQa };
RulerSource ruler_task_source(const std::string& name);

// RULER's tokens_to_generate: niah 128, vt 30, cwe 120, fwe 50, qa 32.
int64_t ruler_tokens_to_generate(const std::string& name);

struct RulerInputs {
  std::string essay;                      // Paul Graham essays (data/text/pg_essays) for the essay haystacks
  const RulerQaData* squad = nullptr;     // qa_1
  const RulerQaData* hotpotqa = nullptr;  // qa_2
};

struct RulerRequest {
  size_t context_tokens = 0;  // the context part holds at most this many tokens (by the counter)
  uint64_t seed = 0;
  size_t sample_index = 0;  // qa: the sample asks the data set's question of this index, as RULER does
};

// Throws kvc::Error for an unknown name (listing the valid ones), a missing input, or a budget too small.
TaskSample make_ruler_sample(const std::string& name, const RulerRequest& request, const TokenCounter& counter,
                             const RulerInputs& inputs);

}  // namespace kvc
