#include "metrics/rouge.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

#include "metrics/text_normalize.h"

namespace kvc {

namespace {

using Words = std::vector<std::string>;

// The package rebuilds each LCS with a recursive Python function, one frame per step of the walk back
// through the table. Under LongBench's eval.py nine frames are already on the stack when the walk starts
// (module, scorer, rouge_score, get_scores, _get_avg_scores, the metric lambda, rouge_l_summary_level,
// _union_lcs, _recon_lcs), so with Python's default recursion limit of 1000 a walk of more than
// 1000 - 9 - 1 steps raises RecursionError, and rouge_score's bare `except:` returns 0.0 for the whole
// pair of texts. Measured with CPython 3.11 (data/reference/longbench_scorer/README.md).
constexpr size_t kMaxLcsWalkSteps = 990;

// The package splits at '.', drops empty pieces, then re-joins each piece's words with single spaces and
// splits at ' ': a whitespace-only piece therefore becomes one empty word.
std::vector<Words> split_sentences(const std::string& text) {
  std::vector<Words> sentences;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('.', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) {
      Words words = split_whitespace(text.substr(start, end - start));
      if (words.empty()) words.emplace_back();
      sentences.push_back(std::move(words));
    }
    start = end + 1;
  }
  return sentences;
}

// Words of one longest common subsequence, reconstructed with the package's tie-break (move up only
// when that keeps a strictly longer subsequence), since which LCS is chosen changes the word set.
// Nothing when the package's recursive walk would exceed Python's recursion limit.
std::optional<std::set<std::string>> lcs_words(const Words& reference, const Words& predicted) {
  const size_t rows = reference.size(), cols = predicted.size();
  // Every step shortens one side or both and the walk ends when one is used up.
  if (std::min(rows, cols) > kMaxLcsWalkSteps) return std::nullopt;
  std::vector<std::vector<int>> table(rows + 1, std::vector<int>(cols + 1, 0));
  for (size_t i = 1; i <= rows; ++i) {
    for (size_t j = 1; j <= cols; ++j) {
      table[i][j] =
          reference[i - 1] == predicted[j - 1] ? table[i - 1][j - 1] + 1 : std::max(table[i - 1][j], table[i][j - 1]);
    }
  }
  std::set<std::string> words;
  size_t i = rows, j = cols, steps = 0;
  while (i > 0 && j > 0) {
    if (++steps > kMaxLcsWalkSteps) return std::nullopt;
    if (reference[i - 1] == predicted[j - 1]) {
      words.insert(reference[i - 1]);
      --i;
      --j;
    } else if (table[i - 1][j] > table[i][j - 1]) {
      --i;
    } else {
      --j;
    }
  }
  return words;
}

size_t distinct_words(const std::vector<Words>& sentences) {
  std::set<std::string> words;
  for (const auto& sentence : sentences) words.insert(sentence.begin(), sentence.end());
  return words.size();
}

}  // namespace

double rouge_l_score(const std::string& prediction, const std::string& ground_truth) {
  const auto predicted = split_sentences(prediction);
  const auto reference = split_sentences(ground_truth);
  // The package raises ValueError for a side without sentences; rouge_score returns 0.0.
  if (predicted.empty() || reference.empty()) return 0.0;
  std::set<std::string> lcs_union;
  for (const auto& reference_sentence : reference) {
    for (const auto& predicted_sentence : predicted) {
      const auto words = lcs_words(reference_sentence, predicted_sentence);
      if (!words) return 0.0;
      lcs_union.insert(words->begin(), words->end());
    }
  }
  // The package's arithmetic, in its order, so that results agree to the last bit.
  const double overlap = static_cast<double>(lcs_union.size());
  const double recall = overlap / static_cast<double>(distinct_words(reference));
  const double precision = overlap / static_cast<double>(distinct_words(predicted));
  return 2.0 * ((precision * recall) / (precision + recall + 1e-8));
}

}  // namespace kvc
