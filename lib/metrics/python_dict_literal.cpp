#include "metrics/python_dict_literal.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "util/error.h"
#include "util/utf8.h"

namespace kvc {

namespace {

class LiteralParser {
 public:
  LiteralParser(const std::string& source, const std::string& path) : text_(source), path_(path) {}

  PythonDictValue parse_assignment(const std::string& name) {
    skip_import_lines();
    expect_word(name);
    skip_blank();
    expect('=');
    PythonDictValue value = parse_value();
    skip_blank();
    if (pos_ != text_.size()) error("unexpected text after the assignment to " + name);
    return value;
  }

 private:
  [[noreturn]] void error(const std::string& what) const {
    const long line = 1 + std::count(text_.begin(), text_.begin() + std::min(pos_, text_.size()), '\n');
    fail("{}:{}: {}", path_, line, what);
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  // Whitespace, line breaks and comments.
  void skip_blank() {
    while (!at_end()) {
      const char c = text_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && text_[pos_] != '\n') ++pos_;
      } else {
        return;
      }
    }
  }

  bool starts_with(const std::string& word) const { return text_.compare(pos_, word.size(), word) == 0; }

  void skip_import_lines() {
    for (skip_blank(); starts_with("from ") || starts_with("import "); skip_blank()) {
      while (!at_end() && text_[pos_] != '\n') ++pos_;
    }
  }

  void expect_word(const std::string& word) {
    const char after = pos_ + word.size() < text_.size() ? text_[pos_ + word.size()] : '\0';
    const bool continues_name = std::isalnum(static_cast<unsigned char>(after)) || after == '_';
    if (!starts_with(word) || continues_name) error("expected '" + word + " = {...}'");
    pos_ += word.size();
  }

  void expect(char c) {
    if (peek() != c) error(std::string("expected '") + c + "'");
    ++pos_;
  }

  PythonDictValue parse_value() {
    skip_blank();
    return peek() == '{' ? parse_dict() : parse_number();
  }

  PythonDictValue parse_dict() {
    PythonDictValue dict;
    dict.is_dict = true;
    expect('{');
    for (skip_blank(); peek() != '}'; skip_blank()) {
      std::u32string key = parse_string();
      skip_blank();
      expect(':');
      PythonDictValue value = parse_value();
      dict.entries.emplace_back(std::move(key), std::move(value));
      skip_blank();
      if (peek() != ',') break;
      ++pos_;
    }
    skip_blank();
    expect('}');
    return dict;
  }

  PythonDictValue parse_number() {
    bool negative = false;
    while (peek() == '-' || peek() == '+') {
      negative ^= peek() == '-';
      ++pos_;
    }
    PythonDictValue value;
    const char* begin = text_.data() + pos_;
    const auto [end, status] = std::from_chars(begin, text_.data() + text_.size(), value.number);
    if (status != std::errc() || end == begin) error("expected a number or a dict");
    pos_ += end - begin;
    if (negative) value.number = -value.number;
    return value;
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t value = 0;
    for (size_t i = 0; i < digits; ++i, ++pos_) {
      const char c = peek();
      const int digit = c >= '0' && c <= '9'   ? c - '0'
                        : c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                               : -1;
      if (digit < 0) error("bad escape in a string literal");
      value = value * 16 + digit;
    }
    return value;
  }

  // A '...' or "..." literal, optionally u-prefixed, with the escapes these files can contain.
  std::u32string parse_string() {
    if (peek() == 'u' || peek() == 'U') ++pos_;
    const char quote = peek();
    if (quote != '\'' && quote != '"') error("expected a string key");
    ++pos_;
    std::string utf8;
    while (peek() != quote) {
      if (at_end() || peek() == '\n') error("unterminated string literal");
      if (peek() != '\\') {
        utf8.push_back(text_[pos_++]);
        continue;
      }
      ++pos_;
      const char escape = text_[pos_++];
      switch (escape) {
        case 'u': utf8_append(utf8, parse_hex(4)); break;
        case 'U': utf8_append(utf8, parse_hex(8)); break;
        case 'x': utf8_append(utf8, parse_hex(2)); break;
        case 'n': utf8.push_back('\n'); break;
        case 't': utf8.push_back('\t'); break;
        case 'r': utf8.push_back('\r'); break;
        case '\\':
        case '\'':
        case '"': utf8.push_back(escape); break;
        default: --pos_; error(std::string("unsupported escape '\\") + escape + "'");
      }
    }
    ++pos_;
    if (!utf8_valid(utf8)) error("string literal is not valid UTF-8");
    return decode_utf8(utf8);
  }

  const std::string& text_;
  const std::string& path_;
  size_t pos_ = 0;
};

}  // namespace

PythonDictValue parse_python_dict_assignment(const std::string& source, const std::string& name,
                                             const std::string& path) {
  return LiteralParser(source, path).parse_assignment(name);
}

}  // namespace kvc
