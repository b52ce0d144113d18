#pragma once
// LongBench v1's 21 data sets as its official code runs them: prompt template, metric, generation length
// and whether only the prediction's first line is scored (the few-shot sets).
#include <string>
#include <vector>

namespace kvc {

// The language a data set's records declare in their "language" field (code sets name the programming
// language, which is not checked).
enum class Language { English, Chinese, Code };

struct DatasetSpec {
  std::string name;
  Language language;
  std::string metric;           // a name from metric_names()
  int max_new_tokens;           // LongBench's generation length for the data set
  bool first_line_only;         // eval.py scores prediction.lstrip('\n').split('\n')[0]
  std::string prompt_template;  // with {context} and, for most sets, {input} after it
};

// The 21 names in LongBench's order: narrativeqa, qasper, multifieldqa_en, multifieldqa_zh, hotpotqa,
// 2wikimqa, musique, dureader, gov_report, qmsum, multi_news, vcsum, trec, triviaqa, samsum, lsht,
// passage_count, passage_retrieval_en, passage_retrieval_zh, lcc, repobench-p.
const std::vector<std::string>& longbench_dataset_names();
// Throws kvc::Error listing the known names when `name` is not one of them.
const DatasetSpec& dataset_spec(const std::string& name);

}  // namespace kvc
