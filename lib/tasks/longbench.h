#pragma once
// LongBench data sets: the JSONL reader, prompts split into context and question, and scoring of
// predictions as LongBench's eval.py does (per sample, per data set, per LongBench-E length bucket).
#include <cstdint>
#include <string>
#include <vector>

#include "tasks/longbench_datasets.h"
#include "tasks/task_sample.h"

namespace kvc {

enum class OnBadLine {
  Skip,  // warn on stderr "file:line: reason" and go on
  Stop,  // throw kvc::Error "file:line: reason"
};

// What a LongBench line says beyond the sample itself.
struct LongBenchRecord {
  std::string dataset;  // its "dataset" field; empty when absent
  int64_t length = -1;  // its "length" field (LongBench-E's length buckets); -1 when absent
  size_t line = 0;      // 1-based line in the file
};

struct LongBenchData {
  std::vector<TaskSample> samples;
  std::vector<LongBenchRecord> records;  // one per sample
  size_t skipped_lines = 0;              // malformed lines passed over under OnBadLine::Skip
};

// One sample per line, as LongBench distributes its data: "context", "input" (the question) and
// "answers" (strings; integers are read as Python's str() writes them) are required; "all_classes"
// (strings or null), "_id" (default "<file name>:<line>"), "dataset", "language" and "length" are
// optional; other fields are ignored. Blank lines are passed over silently. `metric` is left empty:
// take it from the DatasetSpec.
//
// With a `spec`, lines must also fit that data set: a classification set needs its class list, a
// retrieval set answers naming a paragraph ("Paragraph N", "段落N"); such lines are bad lines. A
// record whose "dataset" (or "language") belongs to another set is not a bad line but a wrong file:
// kvc::Error naming file:line whatever `on_bad_line` says. Throws kvc::Error if the file cannot be read.
LongBenchData load_longbench_jsonl(const std::string& path, OnBadLine on_bad_line = OnBadLine::Stop,
                                   const DatasetSpec* spec = nullptr);

// The data set a LongBench file holds: its first record's "dataset" field, else the file name
// ("hotpotqa.jsonl"); LongBench-E's "_e" suffix is dropped. Throws kvc::Error asking for --dataset when
// neither names a known set.
std::string detect_longbench_dataset(const std::string& path);

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

// A data set's score as eval.py reports it: round(100 * sum / n, 2), the sum taken in sample order.
// NaN for no samples (numpy's mean of an empty bucket).
double longbench_percent(const std::vector<double>& scores);

// LongBench-E's buckets by the records' "length": "0-4k" (< 4000), "4-8k" (< 8000) and "8k+", each
// scored as longbench_percent. Throws kvc::Error naming the sample when a length is missing.
struct LengthBucket {
  std::string name;
  size_t samples = 0;
  double percent = 0;
};
std::vector<LengthBucket> longbench_e_buckets(const std::vector<double>& scores,
                                              const std::vector<LongBenchRecord>& records);

}  // namespace kvc
