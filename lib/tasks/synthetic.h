#pragma once
// RULER-style synthetic long-context tasks. Each generator fills a context of at most `context_tokens`
// tokens (by `counter`) and keeps the instruction about the data in the context and the query in the
// question, so that compression can be scored without the question. All are scored with "contains":
// every answer must appear in the prediction. One seed, one sample.
//
// Filler for the retrieval and tracking tasks is `haystack` cut into sentences, or RULER's noise
// sentences when `haystack` is empty; the word tasks make their own text and ignore it.
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/task_sample.h"

namespace kvc {

// One fact "One of the special magic numbers for {key} is: {value}." with a 7-digit value, asked by key.
TaskSample niah_single(size_t context_tokens, uint64_t seed, const TokenCounter& counter, const std::string& haystack);
// Four facts with different keys; one is asked.
TaskSample niah_multikey(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                         const std::string& haystack);
// Four facts with one key; all four values must be answered.
TaskSample niah_multivalue(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                           const std::string& haystack);
// Four facts with different keys; all four are asked.
TaskSample niah_multiquery(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                           const std::string& haystack);
// Two chains "VAR ABCDE = 12345." "VAR FGHIJ = VAR ABCDE." ... of four hops each, interleaved in the
// filler; the answers are the five variables holding the asked chain's value.
TaskSample variable_tracking(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                             const std::string& haystack);
// A numbered list of English words where ten appear far more often than the rest; the answers are those
// ten (common words extraction).
TaskSample common_words(size_t context_tokens, uint64_t seed, const TokenCounter& counter, const std::string& haystack);
// Coded six-letter words with Zipf frequencies (count of rank r ∝ 1/r²); the answers are the three most
// frequent (frequent words extraction).
TaskSample frequent_words(size_t context_tokens, uint64_t seed, const TokenCounter& counter,
                          const std::string& haystack);

// The task names below, in a stable order: niah_single, niah_multikey, niah_multivalue, niah_multiquery,
// variable_tracking, common_words, frequent_words.
const std::vector<std::string>& synthetic_task_names();

// Runs the named generator; throws kvc::Error listing the valid names when `name` is unknown.
TaskSample make_synthetic_sample(const std::string& name, size_t context_tokens, uint64_t seed,
                                 const TokenCounter& counter, const std::string& haystack = "");

}  // namespace kvc
