#include "tasks/ruler_qa_data.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

#include "util/error.h"
#include "util/files.h"

namespace kvc {

namespace {

using Json = nlohmann::json;

Json parse_file(const std::string& path) {
  try {
    return Json::parse(read_text_file(path));
  } catch (const Json::exception& e) {
    fail("{}: not valid JSON ({})", path, e.what());
  }
}

// Sorted distinct documents and each one's index, as `sorted(list(set(docs)))` gives.
std::map<std::string, size_t> index_documents(std::vector<std::string>& documents) {
  std::sort(documents.begin(), documents.end());
  documents.erase(std::unique(documents.begin(), documents.end()), documents.end());
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < documents.size(); ++i) index.emplace(documents[i], i);
  return index;
}

std::string hotpot_document(const Json& paragraph) {
  std::string text = paragraph.at(0).get<std::string>() + "\n";
  for (const auto& sentence : paragraph.at(1)) text += sentence.get<std::string>();
  return text;
}

}  // namespace

RulerQaData read_squad(const std::string& path) {
  const Json data = parse_file(path);
  RulerQaData out;
  try {
    for (const auto& article : data.at("data")) {
      for (const auto& paragraph : article.at("paragraphs")) out.documents.push_back(paragraph.at("context"));
    }
    const auto index = index_documents(out.documents);
    for (const auto& article : data.at("data")) {
      std::vector<size_t> article_documents;
      for (const auto& paragraph : article.at("paragraphs"))
        article_documents.push_back(index.at(paragraph.at("context")));
      for (const auto& paragraph : article.at("paragraphs")) {
        const size_t own = index.at(paragraph.at("context"));
        for (const auto& qa : paragraph.at("qas")) {
          if (qa.value("is_impossible", false)) continue;
          RulerQuestion question{qa.at("question"), {}, {own}, {}};
          for (const auto& answer : qa.at("answers")) question.answers.push_back(answer.at("text"));
          for (size_t document : article_documents) {
            if (document != own) question.nearby_documents.push_back(document);
          }
          out.questions.push_back(std::move(question));
        }
      }
    }
  } catch (const Json::exception& e) {
    fail("{}: not in SQuAD's format ({})", path, e.what());
  }
  return out;
}

RulerQaData read_hotpotqa(const std::string& path) {
  const Json data = parse_file(path);
  RulerQaData out;
  try {
    for (const auto& item : data) {
      for (const auto& paragraph : item.at("context")) out.documents.push_back(hotpot_document(paragraph));
    }
    const auto index = index_documents(out.documents);
    for (const auto& item : data) {
      RulerQuestion question{item.at("question"), {item.at("answer")}, {}, {}};
      for (const auto& paragraph : item.at("context"))
        question.gold_documents.push_back(index.at(hotpot_document(paragraph)));
      out.questions.push_back(std::move(question));
    }
  } catch (const Json::exception& e) {
    fail("{}: not in HotpotQA's format ({})", path, e.what());
  }
  return out;
}

RulerQaData load_ruler_qa(const std::string& dir, const std::string& task) {
  const bool squad = task == "qa_1";
  KVC_CHECK(squad || task == "qa_2", "no QA data set for task '{}'", task);
  const std::string path = dir + (squad ? "/squad.json" : "/hotpotqa.json");
  KVC_CHECK(file_exists(path),
            "--qa-dir: {} is missing (RULER's scripts/data/synthetic/json/download_qa_dataset.sh gets it from {})",
            path,
            squad ? "https://rajpurkar.github.io/SQuAD-explorer/dataset/dev-v2.0.json"
                  : "http://curtis.ml.cmu.edu/datasets/hotpot/hotpot_dev_distractor_v1.json");
  return squad ? read_squad(path) : read_hotpotqa(path);
}

}  // namespace kvc
