#include "tasks/ruler_common.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <set>
#include <sstream>

#include "tasks/haystack.h"
#include "util/error.h"
#include "util/trim.h"

namespace kvc {

namespace {

const char* metric_of(const std::string& task) {
  return task.rfind("qa_", 0) == 0 ? "string_match_part" : "string_match_all";
}

// Python's str.strip() whitespace, as RULER strips its sentences.
constexpr const char* kWhitespace = " \t\n\r\f\v";

}  // namespace

TaskSample ruler_sample(const std::string& task, const RulerRequest& request, const RulerPrompt& prompt,
                        const std::string& context_data) {
  TaskSample sample;
  sample.id = fmt::format("{}-{}tok-seed{}", task, request.context_tokens, request.seed);
  sample.metric = metric_of(task);
  sample.context = prompt.head + context_data;
  sample.question = prompt.tail;
  sample.answer_prefix = prompt.answer_prefix;
  return sample;
}

const std::vector<int>& ruler_depths() {
  static const std::vector<int> depths = [] {
    std::vector<int> out;
    // 100 * k / 39 is never halfway between integers for 0 < k < 39, so rounding mode cannot matter.
    for (int k = 0; k < 40; ++k) out.push_back(static_cast<int>(std::lround(100.0 * k / 39.0)));
    return out;
  }();
  return depths;
}

std::vector<size_t> sample_indices(TaskRng& rng, size_t n, size_t k) {
  assert(k <= n);
  std::vector<size_t> drawn;
  if (2 * k >= n) {  // dense: a partial shuffle
    std::vector<size_t> all(n);
    for (size_t i = 0; i < n; ++i) all[i] = i;
    for (size_t i = 0; i < k; ++i) std::swap(all[i], all[i + rng.below(n - i)]);
    return std::vector<size_t>(all.begin(), all.begin() + k);
  }
  std::set<size_t> seen;
  while (drawn.size() < k) {
    const size_t index = rng.below(n);
    if (seen.insert(index).second) drawn.push_back(index);
  }
  return drawn;
}

std::string random_uuid(TaskRng& rng) {
  const auto bits64 = [&] { return rng.below(1ULL << 32) << 32 | rng.below(1ULL << 32); };
  uint64_t high = bits64(), low = bits64();
  high = (high & ~0xF000ULL) | 0x4000ULL;                // version 4
  low = (low & ~(0xC000ULL << 48)) | (0x8000ULL << 48);  // variant 10xx
  const std::string hex = fmt::format("{:016x}{:016x}", high, low);
  return fmt::format("{}-{}-{}-{}-{}", hex.substr(0, 8), hex.substr(8, 4), hex.substr(12, 4), hex.substr(16, 4),
                     hex.substr(20, 12));
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::vector<std::string> essay_words(const std::string& essay) {
  std::istringstream in(essay);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  KVC_CHECK(!words.empty(), "the essay haystack is empty");
  return words;
}

std::string essay_with_insertions(const std::vector<std::string>& words, size_t count, const std::vector<int>& depths,
                                  const std::vector<std::string>& insertions) {
  std::string text;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0) text += ' ';
    text += words[i % words.size()];
  }
  // RULER splits with nltk's punkt; kvc's splitter (haystack.h) ends sentences at the same marks.
  std::vector<std::string> sentences;
  for (const auto& sentence : split_sentences(text)) sentences.push_back(trim(sentence, kWhitespace));
  std::vector<size_t> positions;
  for (int depth : depths) positions.push_back(static_cast<size_t>(sentences.size() * (depth / 100.0)));
  std::sort(positions.begin(), positions.end());
  std::vector<std::string> pieces;
  size_t last = 0;
  const auto sentences_between = [&](size_t from, size_t to) {
    return fmt::format("{}", fmt::join(sentences.begin() + from, sentences.begin() + to, " "));
  };
  for (size_t i = 0; i < positions.size(); ++i) {
    pieces.push_back(sentences_between(last, positions[i]));
    pieces.push_back(insertions[i]);
    last = positions[i];
  }
  pieces.push_back(sentences_between(last, sentences.size()));
  return fmt::format("{}", fmt::join(pieces, " "));
}

}  // namespace kvc
