#pragma once
// The cells of a sweep: tasks × methods × compression ratios, plus one uncompressed baseline per task
// (method "none", ratio 0). A cell's key names it in the resumable result file.
#include <functional>
#include <map>
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
// the method "none" add no further cells); a method spec for which `sizes_itself(spec)` holds (its own
// parameter sets what it keeps) gets one cell at ratio 0 instead. Order is stable, so a resumed run walks
// the same cells.
std::vector<SweepCell> plan_sweep(const std::vector<std::string>& tasks, const std::vector<std::string>& methods,
                                  const std::vector<double>& ratios,
                                  const std::function<bool(const std::string&)>& sizes_itself = nullptr);

// The method's name without parameters ("snapkv:window=32" -> "snapkv").
std::string method_name(const std::string& spec);

// --method-spec NAME=SPEC items: the cells of method NAME (given bare in --methods, or from all) run the
// press SPEC, a spec of the same method, and keep NAME in their key and row. A recipe names the
// parameters its committed cells were made with this way, whatever the press's defaults are.
// Throws kvc::Error naming --method-spec for a malformed item, an unknown method or a SPEC of another one.
std::map<std::string, std::string> parse_method_specs(const std::vector<std::string>& items,
                                                      const std::vector<std::string>& registered);

// The press to run for a cell's press `press`: its pinned spec, or `press` itself.
std::string pinned_press(const std::string& press, const std::map<std::string, std::string>& pins);

}  // namespace kvc
