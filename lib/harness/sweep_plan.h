#pragma once
// The cells of a sweep: tasks × methods × compression ratios, plus one uncompressed baseline per task
// (method "none", ratio 0). A cell's key names it in the resumable result file.
#include <string>
#include <vector>

namespace kvc {

struct SweepCell {
  std::string task;
  std::string method;  // a press spec, NAME[:key=val,...]
  double ratio = 0;
  std::string key() const;  // "task|method|ratio"
};

// Splits a --methods list at commas, keeping press parameters with their method ("snapkv:window=32,kernel=5,h2o"
// is two methods: a piece with '=' and no ':' continues the previous spec). "all" expands to `all`
// (by default `registered`). Throws kvc::Error naming --methods for an unknown method name.
std::vector<std::string> resolve_methods(const std::vector<std::string>& items,
                                         const std::vector<std::string>& registered);
std::vector<std::string> resolve_methods(const std::vector<std::string>& items,
                                         const std::vector<std::string>& registered,
                                         const std::vector<std::string>& all);

// Checks task names against `known` (kvc::Error naming --tasks and listing them).
void check_task_names(const std::vector<std::string>& tasks, const std::vector<std::string>& known);

// For every task: the baseline, then each compressing method at each ratio > 0 (ratio-0 entries and
// the method "none" add no further cells). Order is stable, so a resumed run walks the same cells.
std::vector<SweepCell> plan_sweep(const std::vector<std::string>& tasks, const std::vector<std::string>& methods,
                                  const std::vector<double>& ratios);

// The method's name without parameters ("snapkv:window=32" -> "snapkv").
std::string method_name(const std::string& spec);

}  // namespace kvc
