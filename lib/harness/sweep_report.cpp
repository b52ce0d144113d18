#include "harness/sweep_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <set>

#include "harness/compression_curve.h"
#include "harness/gnuplot.h"
#include "util/files.h"

namespace kvc {
namespace {

std::vector<std::string> unique_in_order(const std::vector<nlohmann::json>& records, const std::string& field,
                                         const std::string& task = "") {
  std::vector<std::string> out;
  for (const auto& r : records) {
    if (!task.empty() && r["task"] != task) continue;
    const std::string v = r[field].get<std::string>();
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  return out;
}

std::vector<double> ratios_of(const std::vector<nlohmann::json>& records, const std::string& task) {
  std::vector<double> out;
  for (const auto& r : records)
    if (r["task"] == task) out.push_back(r["ratio"].get<double>());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const nlohmann::json* find(const std::vector<nlohmann::json>& records, const std::string& task,
                           const std::string& method, double ratio) {
  for (const auto& r : records)
    if (r["task"] == task && r["method"] == method && std::abs(r["ratio"].get<double>() - ratio) < 1e-9) return &r;
  return nullptr;
}

// A cell's mean with the count and standard error of its samples (sampled tasks: the score is the mean of
// per-sample scores); ppl and kl cells are one number over their windows: n is the window count, no error.
struct CellSummary {
  double score = 0;
  int64_t n = 0;
  double standard_error = std::nan("");
};

CellSummary summarize(const nlohmann::json& result) {
  CellSummary c;
  c.score = result["score"].get<double>();
  const auto samples = result.find("samples");
  if (samples == result.end() || !samples->is_array()) {
    c.n = result.value("windows", int64_t{0});
    return c;
  }
  std::vector<double> scores;
  for (const auto& s : *samples)
    if (s.contains("score") && s["score"].is_number()) scores.push_back(s["score"].get<double>());
  c.n = static_cast<int64_t>(scores.size());
  if (c.n < 2) return c;
  double mean = 0;
  for (double v : scores) mean += v;
  mean /= static_cast<double>(c.n);
  double squares = 0;
  for (double v : scores) squares += (v - mean) * (v - mean);
  c.standard_error = std::sqrt(squares / static_cast<double>(c.n - 1) / static_cast<double>(c.n));
  return c;
}

std::string format_cell(const CellSummary& c, bool show_n) {
  std::string out = format_number(c.score, 4);
  if (!std::isnan(c.standard_error)) out += " ± " + format_number(c.standard_error, 4);
  if (show_n) out += fmt::format(" (n={})", c.n);
  return out;
}

std::string file_safe(const std::string& s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ? c : '_';
  return out;
}

// A method's score–ratio curve on a task: the uncompressed score at 0, then its cells. Empty where the
// method lacks a ratio of the task's grid, or where its ratio 0 is already compressed: a low-rank,
// retrieval or typed row ("lowrank/…", "cache/…") and a press combined with one ("snapkv+cache/q8_0"),
// whose ratios press on top of another compression.
std::vector<CurvePoint> curve_of(const std::vector<nlohmann::json>& records, const std::string& task,
                                 const std::string& method, const std::vector<double>& ratios,
                                 const nlohmann::json& baseline) {
  if (method == "none" || method.find_first_of("+/") != std::string::npos ||
      find(records, task, method, 0.0) != nullptr)
    return {};
  std::vector<CurvePoint> curve{{0.0, baseline["result"]["score"].get<double>()}};
  for (double r : ratios) {
    if (r == 0.0) continue;
    const nlohmann::json* cell = find(records, task, method, r);
    if (cell == nullptr) return {};
    curve.push_back({r, (*cell)["result"]["score"].get<double>()});
  }
  return curve.size() >= 2 ? curve : std::vector<CurvePoint>{};
}

std::string achievable_cell(const std::optional<Achievable>& a) {
  if (!a) return "";
  return (a->at_least ? "≥ " : "") + format_number(a->ratio, 3);
}

// KVCompose's two summaries per method over the tasks with a higher-is-better score and an uncompressed
// baseline (compression_curve.h); empty when no method has a whole curve.
std::string curve_summary_markdown(const std::vector<nlohmann::json>& records) {
  std::vector<std::string> tasks;
  for (const auto& task : unique_in_order(records, "task")) {
    const nlohmann::json* baseline = find(records, task, "none", 0.0);
    if (baseline != nullptr && (*baseline)["result"]["higher_is_better"].get<bool>()) tasks.push_back(task);
  }
  Table t;
  t.columns.push_back("method");
  for (const auto& task : tasks) t.columns.push_back("AUC " + task);
  if (tasks.size() > 1) t.columns.push_back("mean AUC");
  t.columns.insert(t.columns.end(), {"achievable, ε0 = 10%", "achievable, ε0 = 20%"});
  std::vector<std::string> methods;
  for (const auto& task : tasks)
    for (const auto& m : unique_in_order(records, "method", task))
      if (std::find(methods.begin(), methods.end(), m) == methods.end()) methods.push_back(m);
  for (const auto& method : methods) {
    std::vector<std::vector<CurvePoint>> curves;
    std::vector<std::string> row{method};
    double auc_sum = 0;
    for (const auto& task : tasks) {
      const std::vector<CurvePoint> c =
          curve_of(records, task, method, ratios_of(records, task), *find(records, task, "none", 0.0));
      if (c.empty()) break;
      const double auc = *normalised_area(c);
      auc_sum += auc;
      row.push_back(format_number(auc, 4));
      curves.push_back(c);
    }
    if (curves.size() != tasks.size()) continue;  // a method is summarised over every task or not at all
    if (tasks.size() > 1) row.push_back(format_number(auc_sum / static_cast<double>(tasks.size()), 4));
    row.push_back(achievable_cell(achievable_compression(curves, 0.10)));
    row.push_back(achievable_cell(achievable_compression(curves, 0.20)));
    t.rows.push_back(row);
  }
  if (t.rows.empty()) return "";
  return "### Across the compression range\n\n"
         "AUC: the area under each score–ratio curve divided by its span of ratios (the mean score over the range); "
         "achievable: the largest ratio whose relative drop from the uncompressed score, averaged over the tasks, "
         "stays "
         "within ε0 there and at every smaller ratio (linear between measured ratios; ≥: never exceeded), as "
         "KVCompose reports them.\n\n" +
         to_markdown(t) + "\n";
}

}  // namespace

Table sweep_table(const std::vector<nlohmann::json>& records) {
  Table t{{"task", "method", "ratio", "score", "metric", "higher_is_better", "measured_compression",
           "measured_ram_compression", "seconds", "n", "standard_error"},
          {}};
  for (const auto& r : records) {
    const auto& res = r["result"];
    const double compression = res.value("compression_ratio", 0.0);
    const CellSummary c = summarize(res);
    t.rows.push_back({r["task"], r["method"], format_number(r["ratio"].get<double>(), 4),
                      format_number(res["score"].get<double>(), 6), res["metric"],
                      res["higher_is_better"].get<bool>() ? "yes" : "no", format_number(compression, 4),
                      format_number(res.value("ram_ratio", compression), 4),
                      format_number(r["metadata"].value("wall_seconds", 0.0), 2), std::to_string(c.n),
                      std::isnan(c.standard_error) ? "" : format_number(c.standard_error, 6)});
  }
  return t;
}

std::string sweep_markdown(const std::vector<nlohmann::json>& records) {
  std::string out;
  for (const auto& task : unique_in_order(records, "task")) {
    const std::vector<double> ratios = ratios_of(records, task);
    const nlohmann::json* any = find(records, task, unique_in_order(records, "method", task).front(), ratios.front());
    const auto& res = (*any)["result"];
    // One n for the whole table goes in its title; cells that differ (a resumed or interrupted sweep) say theirs.
    std::set<int64_t> counts;
    bool sampled = false;
    for (const auto& r : records)
      if (r["task"] == task) {
        counts.insert(summarize(r["result"]).n);
        sampled = sampled || r["result"].contains("samples");
      }
    const bool one_n = counts.size() == 1;
    std::string what;
    if (sampled)
      what = one_n ? fmt::format("; mean ± standard error over {} samples per cell", *counts.begin())
                   : "; mean ± standard error over n samples";
    else what = one_n ? fmt::format("; {} windows per cell", *counts.begin()) : "; n windows";
    out += fmt::format("### {}: {} ({} is better{})\n\n", task, res["metric"].get<std::string>(),
                       res["higher_is_better"].get<bool>() ? "higher" : "lower", what);
    Table t;
    t.columns.push_back("method \\ ratio");
    for (double r : ratios) t.columns.push_back(format_number(r, 4));
    const nlohmann::json* baseline = find(records, task, "none", 0.0);
    for (const auto& method : unique_in_order(records, "method", task)) {
      std::vector<std::string> row{method};
      for (double r : ratios) {
        const nlohmann::json* cell = find(records, task, method, r);
        if (!cell && r == 0.0) cell = baseline;  // every method starts from the uncompressed cache
        row.push_back(cell ? format_cell(summarize((*cell)["result"]), !one_n) : "");
      }
      t.rows.push_back(row);
    }
    out += to_markdown(t) + "\n";
  }
  return out + curve_summary_markdown(records);
}

std::vector<std::string> write_sweep_report(const std::string& dir, const std::vector<nlohmann::json>& records) {
  write_file_atomic(dir + "/results.csv", to_csv(sweep_table(records)));
  write_file_atomic(dir + "/results.md", "# Sweep results\n\n" + sweep_markdown(records));
  std::vector<std::string> pngs;
  for (const auto& task : unique_in_order(records, "task")) {
    const nlohmann::json* baseline = find(records, task, "none", 0.0);
    std::vector<PlotSeries> series;
    std::string metric = "score";
    const std::vector<double> ratios = ratios_of(records, task);
    for (const auto& method : unique_in_order(records, "method", task)) {
      PlotSeries s{method, {}};
      if (baseline && method == "none") {
        // The uncompressed cache has one score; drawn across every ratio, it is the line to beat.
        const double score = (*baseline)["result"]["score"].get<double>();
        s.name = "none (uncompressed)";
        s.points.push_back({0.0, score});
        for (double r : ratios)
          if (r > 0) s.points.push_back({r, score});
        series.push_back(s);
        continue;
      }
      if (baseline) s.points.push_back({0.0, (*baseline)["result"]["score"].get<double>()});
      for (double r : ratios)
        if (const nlohmann::json* cell = find(records, task, method, r)) {
          s.points.push_back({r, (*cell)["result"]["score"].get<double>()});
          metric = (*cell)["result"]["metric"].get<std::string>();
        }
      series.push_back(s);
    }
    const std::string png = dir + "/score_vs_ratio_" + file_safe(task) + ".png";
    if (plot_lines(png, fmt::format("{}: {} vs compression ratio", task, metric), "compression ratio (share removed)",
                   metric, series))
      pngs.push_back(png);
  }
  return pngs;
}

}  // namespace kvc
