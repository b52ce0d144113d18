#include "metrics/text_normalize.h"

#include <cstring>

#include "util/utf8.h"

namespace kvc {

namespace {

// The characters Python's str.isspace() accepts.
bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

bool is_ascii_punctuation(char32_t c) {
  return c < 0x80 && c != 0 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", static_cast<int>(c));
}

// Python's \w is "alphanumeric or underscore" over all of Unicode. Outside ASCII we treat everything as a
// word character except the punctuation and symbol blocks that occur in English text, which is what
// decides whether an article next to such a character is a word of its own.
bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (is_space(c)) return false;
  struct Range {
    char32_t first, last;
  };
  static constexpr Range kNonWord[] = {
      {0x80, 0xA9},     {0xAB, 0xB4},     {0xB6, 0xB9},     {0xBB, 0xBF},     {0xD7, 0xD7},
      {0xF7, 0xF7},     {0x2000, 0x206F}, {0x20A0, 0x20CF}, {0x2190, 0x23FF}, {0x2500, 0x27BF},
      {0x3000, 0x303F}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF20}, {0xFF3B, 0xFF40}, {0xFF5B, 0xFF65},
      {0xFFFD, 0xFFFD}, {0x1F000, 0x1FAFF}};
  for (const Range& range : kNonWord) {
    if (c >= range.first && c <= range.last) return false;
  }
  return true;
}

char32_t lower_char(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 0x20;
  if (c < 0xC0) return c;
  if (c <= 0xDE) return c == 0xD7 ? c : c + 0x20;                       // Latin-1: À..Þ except ×
  if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137)) return c | 1;  // Latin Extended-A pairs
  if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E)) return c % 2 ? c + 1 : c;
  if (c >= 0x14A && c <= 0x177) return c | 1;
  if (c == 0x178) return 0xFF;                                          // Ÿ
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 0x20;          // Greek capitals
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;                        // Cyrillic capitals
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

std::u32string lower(std::u32string text) {
  for (char32_t& c : text) c = lower_char(c);
  return text;
}

std::vector<std::u32string> split_code_points(const std::u32string& text) {
  std::vector<std::u32string> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

// re.sub(r"\b(a|an|the)\b", " ", text): a maximal run of word characters equal to an article is
// replaced by one space.
std::u32string replace_articles(const std::u32string& text) {
  std::u32string out;
  size_t i = 0;
  while (i < text.size()) {
    if (!is_word_char(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    const size_t start = i;
    while (i < text.size() && is_word_char(text[i])) ++i;
    const std::u32string word = text.substr(start, i - start);
    if (word == U"a" || word == U"an" || word == U"the") {
      out.push_back(U' ');
    } else {
      out += word;
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> split_whitespace(const std::string& text) {
  std::vector<std::string> tokens;
  for (const auto& token : split_code_points(decode_utf8(text))) tokens.push_back(encode_utf8(token));
  return tokens;
}

std::string to_lower(const std::string& text) { return encode_utf8(lower(decode_utf8(text))); }

std::string normalize_answer(const std::string& text) {
  std::u32string without_punctuation;
  for (char32_t c : lower(decode_utf8(text))) {
    if (!is_ascii_punctuation(c)) without_punctuation.push_back(c);
  }
  std::u32string joined;
  for (const auto& token : split_code_points(replace_articles(without_punctuation))) {
    if (!joined.empty()) joined.push_back(U' ');
    joined += token;
  }
  return encode_utf8(joined);
}

}  // namespace kvc
