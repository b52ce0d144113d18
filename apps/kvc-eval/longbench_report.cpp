#include "longbench_report.h"

#include <fmt/format.h>

#include <cmath>

#include "util/error.h"

namespace kvc::eval_app {

OnBadLine parse_on_bad_line(const std::string& text) {
  if (text == "skip") return OnBadLine::Skip;
  if (text == "stop") return OnBadLine::Stop;
  fail("--on-bad-line: unknown policy '{}' (use skip or stop)", text);
}

void add_on_bad_line_option(CLI::App& cmd, std::string& policy) {
  cmd.add_option("--on-bad-line", policy, "skip (warn with file:line and go on) or stop")->capture_default_str();
}

nlohmann::json longbench_summary(const DatasetSpec& spec, const std::vector<double>& scores,
                                 const std::vector<LongBenchRecord>* buckets_from) {
  double sum = 0;
  for (double s : scores) sum += s;
  nlohmann::json out = {{"dataset", spec.name},
                        {"metric", spec.metric},
                        {"score", scores.empty() ? 0.0 : sum / static_cast<double>(scores.size())},
                        {"longbench_score", longbench_percent(scores)},
                        {"samples_scored", scores.size()}};
  if (buckets_from != nullptr) {
    nlohmann::json buckets = nlohmann::json::object();
    for (const auto& bucket : longbench_e_buckets(scores, *buckets_from)) {
      buckets[bucket.name] = {{"samples", bucket.samples}, {"longbench_score", bucket.percent}};
    }
    out["length_buckets"] = buckets;
  }
  return out;
}

std::string describe_longbench_score(const nlohmann::json& summary) {
  auto percent = [](const nlohmann::json& value) {
    return value.is_number() && std::isfinite(value.get<double>()) ? fmt::format("{:.2f}", value.get<double>())
                                                                   : std::string("-");
  };
  std::string text = fmt::format("{}: {} {} over {} samples", summary["dataset"].get<std::string>(),
                                 summary["metric"].get<std::string>(), percent(summary["longbench_score"]),
                                 summary["samples_scored"].get<size_t>());
  if (summary.contains("length_buckets")) {
    std::string parts;
    for (const auto& [name, bucket] : summary["length_buckets"].items()) {
      parts += fmt::format("{}{} {} [{}]", parts.empty() ? "" : ", ", name, percent(bucket["longbench_score"]),
                           bucket["samples"].get<size_t>());
    }
    text += " (" + parts + ")";
  }
  return text;
}

}  // namespace kvc::eval_app
