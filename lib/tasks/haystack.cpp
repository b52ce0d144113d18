#include "tasks/haystack.h"

#include <algorithm>
#include <cassert>
#include <cctype>
#include <numeric>

#include "util/error.h"
#include "util/files.h"

namespace kvc {

namespace {

bool is_space(char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; }

// A period after these does not end a sentence ("Mr. Darcy", "J. Austen").
bool ends_with_abbreviation(const std::string& text, size_t period) {
  size_t start = period;
  while (start > 0 && std::isalpha(static_cast<unsigned char>(text[start - 1]))) --start;
  const std::string word = text.substr(start, period - start);
  if (word.size() == 1 && std::isupper(static_cast<unsigned char>(word[0]))) return true;
  static const char* const kAbbreviations[] = {"Mr", "Mrs", "Ms", "Dr", "St", "Jr", "Sr", "vs", "etc", "e.g", "i.e"};
  // "e.g" and "i.e" end in a letter run of one, so also look one period further back.
  const std::string dotted = start >= 2 && text[start - 1] == '.' ? text.substr(start - 2, period - start + 2) : "";
  for (const char* abbreviation : kAbbreviations) {
    if (word == abbreviation || dotted == abbreviation) return true;
  }
  return false;
}

bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }

// Index just past the whitespace that ends a sentence at `i`, or npos when no sentence ends there.
size_t sentence_end(const std::string& text, size_t i) {
  const char c = text[i];
  if (c == '\n' && i + 1 < text.size() && text[i + 1] == '\n') {
    size_t end = i;
    while (end < text.size() && is_space(text[end])) ++end;
    return end;
  }
  if (c != '.' && c != '!' && c != '?') return std::string::npos;
  if (c == '.' && ends_with_abbreviation(text, i)) return std::string::npos;
  size_t end = i + 1;
  while (end < text.size() && is_closer(text[end])) ++end;
  if (end < text.size() && !is_space(text[end])) return std::string::npos;
  while (end < text.size() && is_space(text[end])) ++end;
  return end;
}

// Filler sentences are joined with a space unless they already end in whitespace.
bool needs_space_after(const std::string& sentence) { return sentence.empty() || !is_space(sentence.back()); }

bool is_blank(const std::string& text) {
  return std::all_of(text.begin(), text.end(), [](char c) { return is_space(c); });
}

}  // namespace

std::string load_haystack(const std::vector<std::string>& paths) {
  KVC_CHECK(!paths.empty(), "no haystack files given");
  std::string text;
  for (const auto& path : paths) {
    if (!text.empty()) text += "\n\n";
    text += read_text_file(path);
  }
  return text;
}

std::vector<std::string> split_sentences(const std::string& text) {
  std::vector<std::string> sentences;
  size_t start = 0;
  while (start < text.size() && is_space(text[start])) ++start;
  size_t i = start;
  while (i < text.size()) {
    const size_t end = sentence_end(text, i);
    if (end == std::string::npos) {
      ++i;
      continue;
    }
    sentences.push_back(text.substr(start, end - start));
    start = i = end;
  }
  if (start < text.size()) sentences.push_back(text.substr(start));
  return sentences;
}

const std::vector<std::string>& noise_sentences() {
  static const std::vector<std::string> sentences =
      split_sentences("The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. ");
  return sentences;
}

std::vector<std::string> filler_sentences(const std::string& haystack) {
  if (haystack.empty()) return noise_sentences();
  auto sentences = split_sentences(haystack);
  sentences.erase(std::remove_if(sentences.begin(), sentences.end(), is_blank), sentences.end());
  KVC_CHECK(!sentences.empty(), "the haystack text has no sentences");
  return sentences;
}

AssembledText assemble_haystack(const std::vector<std::string>& sentences, size_t count,
                                const std::vector<Insertion>& insertions) {
  assert(!sentences.empty() || count == 0);
  // Filler sentence k is sentences[k % size].
  std::vector<size_t> boundaries(count + 1, 0);
  for (size_t k = 0; k < count; ++k) {
    const std::string& sentence = sentences[k % sentences.size()];
    boundaries[k + 1] = boundaries[k] + sentence.size() + (needs_space_after(sentence) ? 1 : 0);
  }
  const double filler_chars = static_cast<double>(boundaries.back());

  // Sentence boundary chosen for each insertion; stable order keeps equal boundaries in given order.
  std::vector<size_t> boundary_of(insertions.size());
  for (size_t n = 0; n < insertions.size(); ++n) {
    const double target = std::clamp(insertions[n].depth, 0.0, 1.0) * filler_chars;
    auto nearest = std::lower_bound(boundaries.begin(), boundaries.end(), target);
    if (nearest == boundaries.end() ||
        (nearest != boundaries.begin() && target - *(nearest - 1) <= *nearest - target)) {
      --nearest;
    }
    boundary_of[n] = static_cast<size_t>(nearest - boundaries.begin());
  }
  std::vector<size_t> order(insertions.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return boundary_of[a] < boundary_of[b]; });

  AssembledText out;
  out.text.reserve(boundaries.back() + insertions.size() * 64);
  out.offsets.resize(insertions.size());
  size_t next = 0;
  for (size_t k = 0; k <= count; ++k) {
    for (; next < order.size() && boundary_of[order[next]] == k; ++next) {
      out.offsets[order[next]] = out.text.size();
      out.text += insertions[order[next]].text;
      out.text += ' ';
    }
    if (k == count) break;
    const std::string& sentence = sentences[k % sentences.size()];
    out.text += sentence;
    if (needs_space_after(sentence)) out.text += ' ';
  }
  while (!out.text.empty() && is_space(out.text.back())) out.text.pop_back();
  return out;
}

}  // namespace kvc
