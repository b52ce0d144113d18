#pragma once
// Tables and plots of a sweep from its result records (the lines of results.jsonl): results.csv (one
// row per cell), results.md (per task: methods × ratios, the baseline as ratio 0) and, per task,
// score_vs_ratio_<task>.png with one line per method starting at the uncompressed score.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/tables.h"

namespace kvc {

// Each record: {"cell", "task", "method", "ratio", "result": {"score", "metric", "higher_is_better",
// "compression_ratio", ...}, "metadata": {...}}.
Table sweep_table(const std::vector<nlohmann::json>& records);
// One Markdown section per task (in first-seen order): methods as rows, ratios as columns.
std::string sweep_markdown(const std::vector<nlohmann::json>& records);
// Writes results.csv, results.md and the plots into `dir`; returns the PNG paths rendered.
std::vector<std::string> write_sweep_report(const std::string& dir, const std::vector<nlohmann::json>& records);

}  // namespace kvc
