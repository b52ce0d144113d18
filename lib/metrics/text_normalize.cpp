#include "metrics/text_normalize.h"

#include <cstring>

#include "metrics/python_unicode.h"
#include "util/utf8.h"

namespace kvc {

namespace {

// string.punctuation: ASCII only, so "，" or "—" stay in an English answer.
bool is_ascii_punctuation(char32_t c) {
  return c < 0x80 && c != 0 && std::strchr("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", static_cast<int>(c));
}

std::vector<std::u32string> split_code_points(const std::u32string& text) {
  std::vector<std::u32string> tokens;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && python_unicode::is_space(text[i])) ++i;
    const size_t start = i;
    while (i < text.size() && !python_unicode::is_space(text[i])) ++i;
    if (i > start) tokens.push_back(text.substr(start, i - start));
  }
  return tokens;
}

// re.sub(r"\b(a|an|the)\b", " ", text): a maximal run of word characters equal to an article is
// replaced by one space. Word characters are Python's (letters and digits of any script, '_'); combining
// marks are not, so the "the" in "the\u0301" is a whole word and goes.
std::u32string replace_articles(const std::u32string& text) {
  std::u32string out;
  size_t i = 0;
  while (i < text.size()) {
    if (!python_unicode::is_word_char(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    const size_t start = i;
    while (i < text.size() && python_unicode::is_word_char(text[i])) ++i;
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

std::string to_lower(const std::string& text) { return encode_utf8(python_unicode::lower(decode_utf8(text))); }

std::string normalize_answer(const std::string& text) {
  std::u32string without_punctuation;
  for (char32_t c : python_unicode::lower(decode_utf8(text))) {
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
