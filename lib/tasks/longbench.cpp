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

namespace kvc {

namespace {

using Json = nlohmann::json;

std::string file_name_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The field as a list of strings; nullopt with `reason` set when it is something else.
std::optional<std::vector<std::string>> string_list(const Json& record, const char* field, std::string& reason) {
  const Json& value = record.at(field);
  if (!value.is_array()) {
    reason = fmt::format("'{}' is not an array", field);
    return std::nullopt;
  }
  std::vector<std::string> items;
  for (const Json& item : value) {
    if (!item.is_string()) {
      reason = fmt::format("'{}' holds a {}, expected strings", field, item.type_name());
      return std::nullopt;
    }
    items.push_back(item.get<std::string>());
  }
  return items;
}

// The sample on one line, or nullopt with `reason` saying what is wrong with it.
std::optional<TaskSample> parse_line(const std::string& line, const std::string& default_id, std::string& reason) {
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
  TaskSample sample;
  sample.context = record.at("context").get<std::string>();
  sample.question = record.at("input").get<std::string>();
  auto answers = string_list(record, "answers", reason);
  if (!answers) return std::nullopt;
  if (answers->empty()) {
    reason = "'answers' is empty";
    return std::nullopt;
  }
  sample.answers = std::move(*answers);
  if (record.contains("all_classes") && !record.at("all_classes").is_null()) {
    auto classes = string_list(record, "all_classes", reason);
    if (!classes) return std::nullopt;
    sample.all_classes = std::move(*classes);
  }
  if (record.contains("_id")) {
    if (!record.at("_id").is_string()) {
      reason = "'_id' is not a string";
      return std::nullopt;
    }
    sample.id = record.at("_id").get<std::string>();
  } else {
    sample.id = default_id;
  }
  return sample;
}

bool is_blank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

LongBenchData load_longbench_jsonl(const std::string& path, OnBadLine on_bad_line) {
  const std::string text = read_text_file(path);
  const std::string file_name = file_name_of(path);
  LongBenchData data;
  size_t line_number = 0;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (is_blank(line)) continue;
    std::string reason;
    auto sample = parse_line(line, fmt::format("{}:{}", file_name, line_number), reason);
    if (sample) {
      data.samples.push_back(std::move(*sample));
      continue;
    }
    if (on_bad_line == OnBadLine::Stop) fail("{}:{}: {}", path, line_number, reason);
    fmt::print(stderr, "{}:{}: {}; line skipped\n", path, line_number, reason);
    ++data.skipped_lines;
  }
  return data;
}

const std::vector<std::string>& longbench_dataset_names() {
  static const std::vector<std::string> names = {"narrativeqa", "qasper",           "hotpotqa", "gov_report",
                                                 "trec",        "passage_retrieval_en", "lcc"};
  return names;
}

const DatasetSpec& dataset_spec(const std::string& name) {
  // Templates, metrics and lengths as in LongBench's config/dataset2prompt.json, dataset2maxlen.json and
  // eval.py.
  static const std::vector<DatasetSpec> specs = {
      {"narrativeqa",
       "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
       "as concisely as you can, using a single phrase if possible. Do not provide any explanation.\n\nStory: "
       "{context}\n\nNow, answer the question based on the story as concisely as you can, using a single phrase if "
       "possible. Do not provide any explanation.\n\nQuestion: {input}\n\nAnswer:",
       "qa_f1", 128, false},
      {"qasper",
       "You are given a scientific article and a question. Answer the question as concisely as you can, using a "
       "single phrase or sentence if possible. If the question cannot be answered based on the information in the "
       "article, write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or "
       "\"unanswerable\". Do not provide any explanation.\n\nArticle: {context}\n\n Answer the question based on "
       "the above article as concisely as you can, using a single phrase or sentence if possible. If the question "
       "cannot be answered based on the information in the article, write \"unanswerable\". If the question is a "
       "yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any explanation.\n\nQuestion: "
       "{input}\n\nAnswer:",
       "qa_f1", 128, false},
      {"hotpotqa",
       "Answer the question based on the given passages. Only give me the answer and do not output any other "
       "words.\n\nThe following are given passages.\n{context}\n\nAnswer the question based on the given passages. "
       "Only give me the answer and do not output any other words.\n\nQuestion: {input}\nAnswer:",
       "qa_f1", 32, false},
      {"gov_report",
       "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n"
       "{context}\n\nNow, write a one-page summary of the report.\n\nSummary:",
       "rouge_l", 512, false},
      {"trec",
       "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n{input}",
       "classification", 64, true},
      {"passage_retrieval_en",
       "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the "
       "abstract is from.\n\n{context}\n\nThe following is an abstract.\n\n{input}\n\nPlease enter the number of "
       "the paragraph that the abstract is from. The answer format must be like \"Paragraph 1\", \"Paragraph 2\", "
       "etc.\n\nThe answer is: ",
       "retrieval", 32, false},
      {"lcc", "Please complete the code given below. \n{context}Next line of code:\n", "code_sim", 64, false},
  };
  auto it = std::find_if(specs.begin(), specs.end(), [&](const DatasetSpec& spec) { return spec.name == name; });
  KVC_CHECK(it != specs.end(), "unknown LongBench data set '{}' (known: {})", name,
            fmt::join(longbench_dataset_names(), ", "));
  return *it;
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

double score_prediction(const DatasetSpec& spec, const std::string& prediction, const TaskSample& sample) {
  std::string scored = prediction;
  if (spec.first_line_only) {
    // prediction.lstrip('\n').split('\n')[0]
    const size_t begin = std::min(scored.find_first_not_of('\n'), scored.size());
    scored = scored.substr(begin, scored.find('\n', begin) - begin);
  }
  return score_with_metric(spec.metric, scored, sample.answers, sample.all_classes);
}

}  // namespace kvc
