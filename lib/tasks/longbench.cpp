#include "tasks/longbench.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "metrics/metric_registry.h"
#include "tasks/text_template.h"
#include "util/error.h"
#include "util/files.h"
#include "util/lines.h"

namespace kvc {

namespace {

using Json = nlohmann::json;

std::string file_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The field as a list of strings; nullopt with `reason` set when it is something else. Integers are
// accepted where `integers_as_text`, written as Python's str() writes them (eval.py compares str()s).
std::optional<std::vector<std::string>> string_list(const Json& record, const char* field, bool integers_as_text,
                                                    std::string& reason) {
  const Json& value = record.at(field);
  if (!value.is_array()) {
    reason = fmt::format("'{}' is not an array", field);
    return std::nullopt;
  }
  std::vector<std::string> items;
  for (const Json& item : value) {
    if (item.is_string()) {
      items.push_back(item.get<std::string>());
    } else if (integers_as_text && item.is_number_integer()) {
      items.push_back(item.dump());
    } else {
      reason = fmt::format("'{}' holds a {}, expected strings", field, item.type_name());
      return std::nullopt;
    }
  }
  return items;
}

bool optional_string(const Json& record, const char* field, std::string& out, std::string& reason) {
  if (!record.contains(field) || record.at(field).is_null()) return true;
  if (!record.at(field).is_string()) {
    reason = fmt::format("'{}' is not a string", field);
    return false;
  }
  out = record.at(field).get<std::string>();
  return true;
}

struct ParsedLine {
  TaskSample sample;
  LongBenchRecord record;
  std::string language;
};

// The sample on one line, or nullopt with `reason` saying what is wrong with it.
std::optional<ParsedLine> parse_line(const std::string& line, const std::string& default_id, std::string& reason) {
  const Json record = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) {
    reason = "not valid JSON";
    return std::nullopt;
  }
  if (!record.is_object()) {
    reason = "not a JSON object";
    return std::nullopt;
  }
  for (const char* field : {"context", "input"}) {
    if (!record.contains(field) || !record.at(field).is_string()) {
      reason = fmt::format("'{}' is missing or not a string", field);
      return std::nullopt;
    }
  }
  if (!record.contains("answers")) {
    reason = "'answers' is missing";
    return std::nullopt;
  }
  ParsedLine parsed;
  TaskSample& sample = parsed.sample;
  sample.context = record.at("context").get<std::string>();
  sample.question = record.at("input").get<std::string>();
  auto answers = string_list(record, "answers", true, reason);
  if (!answers) return std::nullopt;
  if (answers->empty()) {
    reason = "'answers' is empty";
    return std::nullopt;
  }
  sample.answers = std::move(*answers);
  if (record.contains("all_classes") && !record.at("all_classes").is_null()) {
    auto classes = string_list(record, "all_classes", false, reason);
    if (!classes) return std::nullopt;
    sample.all_classes = std::move(*classes);
  }
  sample.id = default_id;
  if (!optional_string(record, "_id", sample.id, reason)) return std::nullopt;
  if (!optional_string(record, "dataset", parsed.record.dataset, reason)) return std::nullopt;
  if (!optional_string(record, "language", parsed.language, reason)) return std::nullopt;
  if (record.contains("length") && !record.at("length").is_null()) {
    if (!record.at("length").is_number_integer() || record.at("length").get<int64_t>() < 0) {
      reason = "'length' is not a non-negative integer";
      return std::nullopt;
    }
    parsed.record.length = record.at("length").get<int64_t>();
  }
  return parsed;
}

bool is_blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

// The set's name without LongBench-E's "_e" suffix, or empty when it names no known set.
std::string known_dataset(const std::string& name) {
  const auto& names = longbench_dataset_names();
  if (std::find(names.begin(), names.end(), name) != names.end()) return name;
  if (name.size() > 2 && name.compare(name.size() - 2, 2, "_e") == 0) {
    const std::string base = name.substr(0, name.size() - 2);
    if (std::find(names.begin(), names.end(), base) != names.end()) return base;
  }
  return "";
}

const char* language_name(Language language) {
  return language == Language::Chinese ? "zh" : language == Language::English ? "en" : "code";
}

// A record of another data set, or in another language, means the whole file is not `spec`'s.
void check_same_dataset(const DatasetSpec& spec, const ParsedLine& parsed, const std::string& where) {
  const std::string& named = parsed.record.dataset;
  KVC_CHECK(named.empty() || known_dataset(named) == spec.name,
            "{}: the record belongs to data set '{}', not '{}': pass the file's own --dataset (or leave "
            "--dataset out to take it from the file)",
            where, named, spec.name);
  KVC_CHECK(
      spec.language == Language::Code || parsed.language.empty() || parsed.language == language_name(spec.language),
      "{}: the record's language is '{}' but {} is a '{}' data set", where, parsed.language, spec.name,
      language_name(spec.language));
}

// What makes a well-formed line unusable for `spec`; empty when it fits.
std::string misfit_reason(const DatasetSpec& spec, const TaskSample& sample) {
  if (spec.metric == "classification" && sample.all_classes.empty()) {
    return fmt::format("'all_classes' is missing or empty, and {} scores against its class list", spec.name);
  }
  if (spec.metric == "retrieval" || spec.metric == "retrieval_zh") {
    const std::string marker = spec.metric == "retrieval" ? "Paragraph " : "段落";
    for (const auto& answer : sample.answers) {
      // LongBench's scorer takes the first "<marker><digits>"; without one it cannot score at all.
      bool found = false;
      for (size_t from = 0; !found && (from = answer.find(marker, from)) != std::string::npos; ++from) {
        const size_t digit = from + marker.size();
        found = digit < answer.size() && answer[digit] >= '0' && answer[digit] <= '9';
      }
      if (!found) return fmt::format("answer '{}' names no paragraph ('{}N')", answer, marker);
    }
  }
  return "";
}

}  // namespace

LongBenchData load_longbench_jsonl(const std::string& path, OnBadLine on_bad_line, const DatasetSpec* spec) {
  const std::string text = read_text_file(path);
  const std::string file_name = file_name_of(path);
  LongBenchData data;
  for_each_line(text, [&](const std::string& line, size_t line_number) {
    if (is_blank(line)) return;
    std::string reason;
    auto parsed = parse_line(line, fmt::format("{}:{}", file_name, line_number), reason);
    if (parsed && spec != nullptr) {
      check_same_dataset(*spec, *parsed, fmt::format("{}:{}", path, line_number));
      reason = misfit_reason(*spec, parsed->sample);
      if (!reason.empty()) parsed.reset();
    }
    if (parsed) {
      parsed->record.line = line_number;
      data.samples.push_back(std::move(parsed->sample));
      data.records.push_back(std::move(parsed->record));
      return;
    }
    if (on_bad_line == OnBadLine::Stop) fail("{}:{}: {}", path, line_number, reason);
    fmt::print(stderr, "{}:{}: {}; line skipped\n", path, line_number, reason);
    ++data.skipped_lines;
  });
  return data;
}

std::string detect_longbench_dataset(const std::string& path) {
  const std::string text = read_text_file(path);
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const Json record = Json::parse(text.substr(start, end - start), nullptr, /*allow_exceptions=*/false);
    start = end + 1;
    if (!record.is_object()) continue;
    if (record.contains("dataset") && record.at("dataset").is_string()) {
      const std::string named = known_dataset(record.at("dataset").get<std::string>());
      if (!named.empty()) return named;
    }
    break;
  }
  std::string stem = file_name_of(path);
  stem = stem.substr(0, stem.find('.'));
  const std::string named = known_dataset(stem);
  KVC_CHECK(!named.empty(),
            "cannot tell which LongBench data set '{}' holds (no known \"dataset\" field, file name not a set's): "
            "pass --dataset (known: {})",
            path, fmt::join(longbench_dataset_names(), ", "));
  return named;
}

PromptParts split_prompt(const std::string& prompt_template, const TaskSample& sample) {
  static const std::string kContext = "{context}", kInput = "{input}";
  const size_t context_at = prompt_template.find(kContext);
  KVC_CHECK(context_at != std::string::npos, "prompt template has no {{context}}: '{}'", prompt_template);
  const size_t cut = context_at + kContext.size();
  KVC_CHECK(prompt_template.find(kContext, cut) == std::string::npos, "prompt template has {{context}} twice: '{}'",
            prompt_template);
  KVC_CHECK(prompt_template.find(kInput) == std::string::npos || prompt_template.find(kInput) > context_at,
            "prompt template puts {{input}} before {{context}}, so the question cannot follow the context: '{}'",
            prompt_template);
  return {fill_placeholders(prompt_template.substr(0, cut), {{"context", sample.context}}),
          fill_placeholders(prompt_template.substr(cut), {{"input", sample.question}})};
}

std::string build_prompt(const std::string& prompt_template, const TaskSample& sample) {
  PromptParts parts = split_prompt(prompt_template, sample);
  return parts.context_part + parts.question_part;
}

}  // namespace kvc
