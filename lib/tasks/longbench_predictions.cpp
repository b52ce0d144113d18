#include "tasks/longbench_predictions.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "util/error.h"
#include "util/files.h"
#include "util/lines.h"

namespace kvc {

namespace {

using Json = nlohmann::json;

// Strings, or integers written as Python's str() writes them.
std::optional<std::vector<std::string>> texts(const Json& value) {
  if (!value.is_array()) return std::nullopt;
  std::vector<std::string> out;
  for (const Json& item : value) {
    if (item.is_string()) {
      out.push_back(item.get<std::string>());
    } else if (item.is_number_integer()) {
      out.push_back(item.dump());
    } else {
      return std::nullopt;
    }
  }
  return out;
}

std::string parse_line(const std::string& line, LongBenchPredictions& out) {
  const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) return "not valid JSON";
  if (!record.is_object()) return "not a JSON object";
  if (!record.contains("pred") || !record.at("pred").is_string()) return "'pred' is missing or not a string";
  if (!record.contains("answers")) return "'answers' is missing";
  auto answers = texts(record.at("answers"));
  if (!answers) return "'answers' is not a list of strings";
  TaskSample sample;
  sample.answers = std::move(*answers);
  if (record.contains("all_classes") && !record.at("all_classes").is_null()) {
    auto classes = texts(record.at("all_classes"));
    if (!classes) return "'all_classes' is not a list of strings";
    sample.all_classes = std::move(*classes);
  }
  LongBenchRecord info;
  if (record.contains("length") && !record.at("length").is_null()) {
    if (!record.at("length").is_number_integer()) return "'length' is not an integer";
    info.length = record.at("length").get<int64_t>();
  }
  out.predictions.push_back(record.at("pred").get<std::string>());
  out.samples.push_back(std::move(sample));
  out.records.push_back(info);
  return "";
}

}  // namespace

LongBenchPredictions load_longbench_predictions(const std::string& path, OnBadLine on_bad_line) {
  const std::string text = read_text_file(path);
  LongBenchPredictions out;
  for_each_line(text, [&](const std::string& line, size_t line_number) {
    if (line.find_first_not_of(" \t") == std::string::npos) return;
    const std::string reason = parse_line(line, out);
    if (reason.empty()) {
      out.records.back().line = line_number;
      return;
    }
    if (on_bad_line == OnBadLine::Stop) fail("{}:{}: {}", path, line_number, reason);
    fmt::print(stderr, "{}:{}: {}; line skipped\n", path, line_number, reason);
    ++out.skipped_lines;
  });
  if (!out.samples.empty()) {
    const std::vector<std::string> last_classes = out.samples.back().all_classes;
    for (auto& sample : out.samples) sample.all_classes = last_classes;
  }
  return out;
}

std::string longbench_prediction_line(const std::string& prediction, const TaskSample& sample,
                                      const LongBenchRecord& record) {
  Json line = {{"pred", prediction}, {"answers", sample.answers}};
  line["all_classes"] = sample.all_classes.empty() ? Json(nullptr) : Json(sample.all_classes);
  line["length"] = record.length >= 0 ? Json(record.length) : Json(nullptr);
  return line.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kvc
