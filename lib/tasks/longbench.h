#pragma once
// LongBench data sets: the JSONL reader, the prompt templates, metrics and generation lengths of the
// data sets we run, and scoring of one prediction as LongBench's eval.py does.
#include <string>
#include <vector>

#include "tasks/task_sample.h"

namespace kvc {

enum class OnBadLine {
  Skip,  // warn on stderr "file:line: reason" and go on
  Stop,  // throw kvc::Error "file:line: reason"
};

struct LongBenchData {
  std::vector<TaskSample> samples;
  size_t skipped_lines = 0;  // malformed lines passed over under OnBadLine::Skip
};

// One sample per line: "context", "input" (the question) and "answers" (strings) are required;
// "all_classes" (strings or null) and "_id" are optional (id defaults to "<file name>:<line>"), other
// fields are ignored. Blank lines are passed over silently. `metric` is left empty: take it from
// dataset_spec(). Throws kvc::Error if the file cannot be read.
LongBenchData load_longbench_jsonl(const std::string& path, OnBadLine on_bad_line = OnBadLine::Stop);

struct DatasetSpec {
  std::string name;
  std::string prompt_template;  // with {context} and {input}
  std::string metric;           // a name from metric_names()
  int max_new_tokens;           // LongBench's generation length for the data set
  bool first_line_only;         // LongBench scores only the first line of the prediction (few-shot sets)
};

// narrativeqa, qasper, hotpotqa, gov_report, trec, passage_retrieval_en, lcc.
const std::vector<std::string>& longbench_dataset_names();
// Throws kvc::Error listing the known names when `name` is not one of them.
const DatasetSpec& dataset_spec(const std::string& name);

// A filled prompt cut after the context: what a compression method may see without the question, and
// the rest, so that context_part + question_part is the whole prompt.
struct PromptParts {
  std::string context_part;
  std::string question_part;
};

// Fills {context} with sample.context and {input} with sample.question. Throws kvc::Error unless the
// template has exactly one {context} and no {input} before it.
PromptParts split_prompt(const std::string& prompt_template, const TaskSample& sample);
std::string build_prompt(const std::string& prompt_template, const TaskSample& sample);

// LongBench's per-sample score: the prediction cut to its first line where the data set asks for it, then
// the best score over the sample's answers with the data set's metric.
double score_prediction(const DatasetSpec& spec, const std::string& prediction, const TaskSample& sample);

}  // namespace kvc
