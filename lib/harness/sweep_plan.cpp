#include "harness/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>

#include "harness/tables.h"
#include "util/error.h"

namespace kvc {

std::string SweepCell::key() const { return fmt::format("{}|{}|{}", task, method, format_number(ratio, 4)); }

std::string method_name(const std::string& spec) { return spec.substr(0, spec.find(':')); }

std::map<std::string, std::string> parse_method_specs(const std::vector<std::string>& items,
                                                      const std::vector<std::string>& registered) {
  std::map<std::string, std::string> pins;
  for (const auto& item : items) {
    const size_t eq = item.find('=');
    KVC_CHECK(eq != std::string::npos && eq > 0 && eq + 1 < item.size() && item.find(':') > eq,
              "--method-spec: '{}' is not NAME=SPEC (e.g. dynamickv=dynamickv:window=32,rmax=2)", item);
    const std::string name = item.substr(0, eq), spec = item.substr(eq + 1);
    KVC_CHECK(std::find(registered.begin(), registered.end(), name) != registered.end(),
              "--method-spec: unknown method '{}' (registered: {})", name, fmt::join(registered, ", "));
    KVC_CHECK(method_name(spec) == name, "--method-spec: '{}' pins {} to a spec of {}; give a spec of {} itself", item,
              name, method_name(spec), name);
    KVC_CHECK(pins.emplace(name, spec).second, "--method-spec: {} is pinned twice", name);
  }
  return pins;
}

std::string pinned_press(const std::string& press, const std::map<std::string, std::string>& pins) {
  const auto it = pins.find(press);
  return it == pins.end() ? press : it->second;
}

std::vector<std::string> resolve_methods(const std::vector<std::string>& items,
                                         const std::vector<std::string>& registered) {
  return resolve_methods(items, registered, registered);
}

std::vector<std::string> resolve_methods(const std::vector<std::string>& items,
                                         const std::vector<std::string>& registered,
                                         const std::vector<std::string>& all) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t begin = 0;
    while (begin <= item.size()) {
      const size_t comma = std::min(item.find(',', begin), item.size());
      std::string piece = item.substr(begin, comma - begin);
      begin = comma + 1;
      if (piece.empty()) continue;
      const size_t eq = piece.find('='), colon = piece.find(':');
      if (eq != std::string::npos && colon == std::string::npos && !out.empty() &&
          out.back().find(':') != std::string::npos) {
        out.back() += "," + piece;  // a parameter of the previous method
      } else if (piece == "all") {
        for (const auto& name : all)
          if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
      } else {
        out.push_back(piece);
      }
    }
  }
  KVC_CHECK(!out.empty(), "--methods: no method given (try --methods none,snapkv or --methods all)");
  for (const auto& spec : out) {
    KVC_CHECK(std::find(registered.begin(), registered.end(), method_name(spec)) != registered.end(),
              "--methods: unknown method '{}' (registered: {})", method_name(spec), fmt::join(registered, ", "));
  }
  return out;
}

void check_task_names(const std::vector<std::string>& tasks, const std::vector<std::string>& known) {
  KVC_CHECK(!tasks.empty(), "--tasks: no task given (known: {})", fmt::join(known, ", "));
  for (const auto& t : tasks) {
    KVC_CHECK(std::find(known.begin(), known.end(), t) != known.end(), "--tasks: unknown task '{}' (known: {})", t,
              fmt::join(known, ", "));
  }
}

std::vector<SweepCell> plan_sweep(const std::vector<std::string>& tasks, const std::vector<std::string>& methods,
                                  const std::vector<double>& ratios,
                                  const std::function<bool(const std::string&)>& sizes_itself) {
  for (double r : ratios) KVC_CHECK(r >= 0 && r < 1, "--ratios: {} is outside [0, 1)", r);
  std::vector<SweepCell> cells;
  for (const auto& task : tasks) {
    cells.push_back({task, "none", 0.0});
    for (const auto& method : methods) {
      if (method_name(method) == "none") continue;
      if (sizes_itself && sizes_itself(method)) {
        cells.push_back({task, method, 0.0});
        continue;
      }
      for (double r : ratios)
        if (r > 0) cells.push_back({task, method, r});
    }
  }
  return cells;
}

}  // namespace kvc
