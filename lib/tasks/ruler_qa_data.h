#pragma once
// The QA data sets of RULER's qa_1 and qa_2, read as RULER's qa.py reads them: SQuAD v2.0 dev
// (answerable questions; the other paragraphs of a question's article are its preferred distractors) and
// HotpotQA dev distractor (each question's ten paragraphs, "title\nsentences"). Documents are the
// distinct paragraphs in sorted order.
#include <string>
#include <vector>

namespace kvc {

struct RulerQuestion {
  std::string question;
  std::vector<std::string> answers;
  std::vector<size_t> gold_documents;    // indices into RulerQaData::documents
  std::vector<size_t> nearby_documents;  // SQuAD: the same article's other paragraphs
};

struct RulerQaData {
  std::vector<std::string> documents;
  std::vector<RulerQuestion> questions;
};

// Throws kvc::Error naming the file when it is missing or not in the expected format.
RulerQaData read_squad(const std::string& path);
RulerQaData read_hotpotqa(const std::string& path);

// DIR/squad.json or DIR/hotpotqa.json, the names RULER's download_qa_dataset.sh gives them; a missing
// file is a kvc::Error naming it and where that script downloads it from.
RulerQaData load_ruler_qa(const std::string& dir, const std::string& task);

}  // namespace kvc
