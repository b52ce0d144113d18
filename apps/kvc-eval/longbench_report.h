#pragma once
// What kvc-eval longbench and longbench-score share: the bad-line flag and the score summary, printed
// as LongBench's eval.py prints it.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tasks/longbench.h"

namespace kvc::eval_app {

// "skip" | "stop"; kvc::Error naming --on-bad-line otherwise.
OnBadLine parse_on_bad_line(const std::string& text);
void add_on_bad_line_option(CLI::App& cmd, std::string& policy);

// {"dataset", "metric", "score" (mean in [0, 1]), "longbench_score" (eval.py's 100 x mean, 2 decimals),
// "samples_scored"} and, when `buckets_from` is given, "length_buckets": LongBench-E's scores.
nlohmann::json longbench_summary(const DatasetSpec& spec, const std::vector<double>& scores,
                                 const std::vector<LongBenchRecord>* buckets_from);

// "hotpotqa: qa_f1 41.27 over 200 samples (0-4k 45.1 [80], 4-8k ...)" from a longbench_summary.
std::string describe_longbench_score(const nlohmann::json& summary);

}  // namespace kvc::eval_app
