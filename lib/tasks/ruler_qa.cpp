// RULER's qa_1 (SQuAD) and qa_2 (HotpotQA): scripts/data/synthetic/qa.py. The question's own paragraphs
// among distractors, as numbered documents.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "tasks/ruler_common.h"
#include "tasks/ruler_generators.h"
#include "tasks/token_budget.h"
#include "util/error.h"

namespace kvc {

namespace {

const char* const kInstruction =
    "Answer the question based on the given documents. Only give me the answer and do not output any other words.";

// qa.py's choice of `count` documents: the gold ones, then the nearby ones (SQuAD: the same article), then
// other documents at random; when `count` reaches the number of documents, all of them in order, repeated.
std::vector<size_t> choose_documents(const RulerQaData& data, const RulerQuestion& question, size_t count,
                                     const std::vector<size_t>& shuffled_nearby,
                                     const std::vector<size_t>& shuffled_others) {
  std::vector<size_t> chosen;
  if (count >= data.documents.size()) {
    for (size_t i = 0; i < count; ++i) chosen.push_back(i % data.documents.size());
    return chosen;
  }
  chosen = question.gold_documents;
  const size_t wanted = count - chosen.size();
  if (wanted > question.nearby_documents.size()) {
    chosen.insert(chosen.end(), question.nearby_documents.begin(), question.nearby_documents.end());
    const size_t others = std::min(wanted - question.nearby_documents.size(), shuffled_others.size());
    chosen.insert(chosen.end(), shuffled_others.begin(), shuffled_others.begin() + others);
  } else {
    chosen.insert(chosen.end(), shuffled_nearby.begin(), shuffled_nearby.begin() + wanted);
  }
  return chosen;
}

}  // namespace

TaskSample make_ruler_qa(const std::string& task, const RulerQaData& data, const RulerRequest& request,
                         const TokenCounter& counter) {
  KVC_CHECK(request.sample_index < data.questions.size(), "{}: sample {} asks for question {}, but the data set has {}",
            task, request.sample_index, request.sample_index, data.questions.size());
  const RulerQuestion& question = data.questions[request.sample_index];

  // A random order of the candidates once per sample: its first n are random.sample(candidates, n), and a
  // longer context keeps the shorter one's documents.
  TaskRng rng(request.seed, "ruler_qa/" + task);
  std::vector<size_t> nearby = question.nearby_documents, others;
  rng.shuffle(nearby);
  const std::set<size_t> excluded = [&] {
    std::set<size_t> out(question.gold_documents.begin(), question.gold_documents.end());
    out.insert(question.nearby_documents.begin(), question.nearby_documents.end());
    return out;
  }();
  for (size_t i = 0; i < data.documents.size(); ++i) {
    if (excluded.count(i) == 0) others.push_back(i);
  }
  rng.shuffle(others);

  const RulerPrompt prompt{fmt::format("{}\n\nThe following are given documents.\n\n", kInstruction),
                           fmt::format("\n\n{}\n\nQuestion: {}", kInstruction, question.question), " Answer:"};
  const auto documents = [&](size_t extra) {
    std::vector<size_t> chosen =
        choose_documents(data, question, question.gold_documents.size() + extra, nearby, others);
    TaskRng order(request.seed, fmt::format("ruler_qa/order/{}", extra));
    order.shuffle(chosen);
    std::vector<std::string> parts;
    for (size_t i = 0; i < chosen.size(); ++i)
      parts.push_back(fmt::format("Document {}:\n{}", i + 1, data.documents[chosen[i]]));
    return fmt::format("{}", fmt::join(parts, "\n\n"));
  };
  const size_t extra = fit_to_budget(task, request.context_tokens, request.context_tokens, counter,
                                     [&](size_t n) { return prompt.head + documents(n); });
  TaskSample sample = ruler_sample(task, request, prompt, documents(extra));
  sample.answers = question.answers;
  return sample;
}

}  // namespace kvc
