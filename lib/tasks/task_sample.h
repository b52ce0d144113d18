#pragma once
// One evaluation sample. Context and question are kept apart so that a compression method can be run
// with or without seeing the question; the model's input is context + question + answer_prefix
// (LongBench data sets instead go through their prompt template, see longbench.h).
#include <functional>
#include <string>
#include <vector>

namespace kvc {

struct TaskSample {
  std::string id;
  std::string context;
  std::string question;
  std::string answer_prefix;             // text the answer continues, e.g. " The pass key is"
  std::vector<std::string> answers;      // acceptable answers, or for "contains" all required ones
  std::vector<std::string> all_classes;  // label set of classification data sets, else empty
  std::string metric;                    // a name from metric_names(); empty where the source fixes none
};

// Tokens of a text under the model's tokenizer. Task generators take one instead of a tokenizer so that
// they stay free of model code (tests count whitespace words).
using TokenCounter = std::function<size_t(const std::string&)>;

}  // namespace kvc
