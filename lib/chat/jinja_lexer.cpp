#include "chat/jinja_lexer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "chat/jinja_value.h"
#include "chat/python_text.h"
#include "util/utf8.h"

namespace kvc::jinja {
namespace {

// Jinja reads "\r\n" and "\r" as "\n" everywhere and, without keep_trailing_newline, drops one final
// newline of the source.
std::string normalize_newlines(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}

  std::vector<Token> run() {
    const size_t n = src_.size();
    size_t pos = 0;
    while (pos < n) {
      const size_t tag = find_tag(pos);
      if (tag == std::string::npos) {
        emit_text(pos, n);
        break;
      }
      const char kind = src_[tag + 1];
      size_t after = tag + 2;
      const char sign = after < n && (src_[after] == '-' || src_[after] == '+') ? src_[after] : 0;
      if (sign) ++after;
      size_t raw_body = std::string::npos;
      if (kind == '%') raw_body = raw_begin_end(after);

      // The text before the tag, with `-` stripping all whitespace before it, and lstrip_blocks
      // removing the indentation of a line that holds nothing but the block or comment tag.
      size_t text_end = tag;
      if (sign == '-') {
        text_end = rstrip_end(pos, tag);
      } else if (sign != '+' && kind != '{') {
        const size_t newline = tag > pos ? src_.rfind('\n', tag - 1) : std::string::npos;
        const bool has_newline = newline != std::string::npos && newline >= pos;
        const size_t line_begin = has_newline ? newline + 1 : pos;
        if ((has_newline || line_starting_) && line_begin < tag && all_space(line_begin, tag)) text_end = line_begin;
      }
      emit_text(pos, text_end);
      line_starting_ = false;

      if (kind == '#') {
        pos = skip_comment(tag, after);
      } else if (raw_body != std::string::npos) {
        line_starting_ = src_[raw_body - 1] == '\n';
        pos = read_raw(tag, raw_body);
      } else {
        push(kind == '{' ? TokenType::VariableBegin : TokenType::BlockBegin, kind == '{' ? "{{" : "{%", tag);
        pos = read_tag(tag, after, kind == '{');
      }
    }
    push(TokenType::End, "", n);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& message) { throw TemplateError(message, line_at(at)); }

  int line_at(size_t pos) {
    for (; line_cursor_ < pos && line_cursor_ < src_.size(); ++line_cursor_) {
      if (src_[line_cursor_] == '\n') ++line_;
    }
    return line_;
  }

  void push(TokenType type, std::string text, size_t at) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.line = line_at(at);
    tokens_.push_back(std::move(token));
  }

  void emit_text(size_t begin, size_t end) {
    if (end > begin) push(TokenType::Text, src_.substr(begin, end - begin), begin);
  }

  size_t find_tag(size_t pos) const {
    for (size_t i = src_.find('{', pos); i != std::string::npos && i + 1 < src_.size(); i = src_.find('{', i + 1)) {
      const char next = src_[i + 1];
      if (next == '{' || next == '%' || next == '#') return i;
    }
    return std::string::npos;
  }

  // Python's \s: Unicode whitespace, decoded from UTF-8.
  size_t space_length(size_t pos) const {
    size_t length = utf8_sequence_length(src_, pos);
    if (length == 0) return 0;
    return py::is_space(utf8_decode(src_, pos, length)) ? length : 0;
  }
  size_t skip_space(size_t pos) const {
    while (pos < src_.size()) {
      const size_t length = space_length(pos);
      if (length == 0) break;
      pos += length;
    }
    return pos;
  }
  bool all_space(size_t begin, size_t end) const { return skip_space(begin) >= end; }
  // The end of [begin, end) once trailing whitespace is gone (str.rstrip()).
  size_t rstrip_end(size_t begin, size_t end) const {
    size_t kept = begin;
    for (size_t pos = begin; pos < end;) {
      const size_t length = space_length(pos);
      if (length == 0) {
        const size_t step = utf8_sequence_length(src_, pos);
        pos += step == 0 ? 1 : step;
        kept = pos;
      } else {
        pos += length;
      }
    }
    return kept;
  }
  bool at(size_t pos, std::string_view text) const { return src_.compare(pos, text.size(), text) == 0; }

  // `{% raw %}` (or `{%- raw -%}`): where its body starts, else npos.
  size_t raw_begin_end(size_t pos) const {
    pos = skip_space(pos);
    if (!at(pos, "raw")) return std::string::npos;
    pos = skip_space(pos + 3);
    if (at(pos, "-%}")) return skip_space(pos + 3);
    if (at(pos, "%}")) return pos + 2;
    return std::string::npos;
  }

  // Past the end of a block or comment tag: `-` eats the whitespace after it, `+` nothing, and a
  // plain end drops one newline (trim_blocks).
  size_t after_block_end(size_t pos, char sign, size_t end_length) {
    pos += end_length;
    if (sign == '-') {
      pos = skip_space(pos);
    } else if (sign != '+' && pos < src_.size() && src_[pos] == '\n') {
      ++pos;
    }
    line_starting_ = pos > 0 && src_[pos - 1] == '\n';
    return pos;
  }

  size_t skip_comment(size_t tag, size_t body) {
    const size_t close = src_.find("#}", body);
    // jinja2 reports a comment left open only when something follows it.
    if (close == std::string::npos && body >= src_.size()) return src_.size();
    if (close == std::string::npos) fail(tag, "missing end of comment tag");
    const char sign = close > body && (src_[close - 1] == '-' || src_[close - 1] == '+') ? src_[close - 1] : 0;
    return after_block_end(close, sign, 2);
  }

  size_t read_raw(size_t tag, size_t body) {
    if (body >= src_.size()) return src_.size();  // as a comment: open at the very end is no error
    for (size_t start = src_.find("{%", body); start != std::string::npos; start = src_.find("{%", start + 1)) {
      size_t pos = start + 2;
      const char open_sign = pos < src_.size() && (src_[pos] == '-' || src_[pos] == '+') ? src_[pos] : 0;
      if (open_sign) ++pos;
      pos = skip_space(pos);
      if (!at(pos, "endraw")) continue;
      pos = skip_space(pos + 6);
      char close_sign = 0;
      if (at(pos, "+%}") || at(pos, "-%}")) {
        close_sign = src_[pos];
        ++pos;
      } else if (!at(pos, "%}")) {
        continue;
      }
      size_t text_end = start;
      if (open_sign == '-') {
        text_end = rstrip_end(body, start);
      } else if (open_sign != '+') {
        const size_t newline = start > body ? src_.rfind('\n', start - 1) : std::string::npos;
        const bool has_newline = newline != std::string::npos && newline >= body;
        const size_t line_begin = has_newline ? newline + 1 : body;
        if ((has_newline || line_starting_) && line_begin < start && all_space(line_begin, start))
          text_end = line_begin;
      }
      emit_text(body, text_end);
      return after_block_end(pos, close_sign, 2);
    }
    fail(tag, "missing end of raw directive");
  }

  size_t read_tag(size_t tag, size_t pos, bool variable) {
    std::vector<char> closers;
    const size_t n = src_.size();
    while (true) {
      if (pos >= n)
        fail(tag, variable ? "unexpected end of template: '{{' is never closed"
                           : "unexpected end of template: '{%' is never closed");
      if (closers.empty()) {
        if (variable) {
          if (at(pos, "-}}")) {
            push(TokenType::VariableEnd, "}}", pos);
            pos = skip_space(pos + 3);
            line_starting_ = src_[pos - 1] == '\n';
            return pos;
          }
          if (at(pos, "}}")) {
            push(TokenType::VariableEnd, "}}", pos);
            line_starting_ = false;
            return pos + 2;
          }
        } else {
          if (at(pos, "+%}") || at(pos, "-%}")) {
            push(TokenType::BlockEnd, "%}", pos);
            return after_block_end(pos + 1, src_[pos], 2);
          }
          if (at(pos, "%}")) {
            push(TokenType::BlockEnd, "%}", pos);
            return after_block_end(pos, 0, 2);
          }
        }
      }
      const char c = src_[pos];
      if (const size_t space = space_length(pos)) {
        pos += space;
      } else if (is_digit(c)) {
        pos = read_number(pos);
      } else if (is_name_start(c)) {
        size_t end = pos;
        while (end < n && is_name_char(src_[end])) ++end;
        push(TokenType::Name, src_.substr(pos, end - pos), pos);
        pos = end;
      } else if (c == '\'' || c == '"') {
        pos = read_string(pos);
      } else {
        pos = read_operator(pos, closers);
      }
    }
  }

  // Digits with single underscores between them: jinja's (\d+_)*\d+.
  size_t digits_end(size_t pos) const {
    if (pos >= src_.size() || !is_digit(src_[pos])) return std::string::npos;
    while (true) {
      while (pos < src_.size() && is_digit(src_[pos])) ++pos;
      if (pos + 1 < src_.size() && src_[pos] == '_' && is_digit(src_[pos + 1])) {
        ++pos;
        continue;
      }
      return pos;
    }
  }

  size_t exponent_end(size_t pos) const {
    if (pos >= src_.size() || (src_[pos] != 'e' && src_[pos] != 'E')) return std::string::npos;
    ++pos;
    if (pos < src_.size() && (src_[pos] == '+' || src_[pos] == '-')) ++pos;
    return digits_end(pos);
  }

  size_t read_number(size_t pos) {
    const size_t n = src_.size();
    // Floats first, as jinja tries them first, and never right after a dot (`messages.0.role`).
    if (pos == 0 || src_[pos - 1] != '.') {
      const size_t whole = digits_end(pos);
      size_t end = std::string::npos;
      if (whole < n && src_[whole] == '.') {
        const size_t fraction = digits_end(whole + 1);
        if (fraction != std::string::npos) {
          const size_t exponent = exponent_end(fraction);
          end = exponent != std::string::npos ? exponent : fraction;
        }
      } else {
        end = exponent_end(whole);
      }
      if (end != std::string::npos) {
        std::string text;
        for (size_t i = pos; i < end; ++i) {
          if (src_[i] != '_') text += src_[i];
        }
        Token token;
        token.type = TokenType::Float;
        token.text = src_.substr(pos, end - pos);
        token.number = std::strtod(text.c_str(), nullptr);
        token.line = line_at(pos);
        tokens_.push_back(std::move(token));
        return end;
      }
    }
    int base = 10;
    size_t begin = pos, end = pos;
    auto run = [&](size_t from, auto&& ok) {
      size_t i = from;
      while (i < n) {
        if (ok(src_[i])) {
          ++i;
        } else if (src_[i] == '_' && i + 1 < n && ok(src_[i + 1])) {
          i += 2;
        } else {
          break;
        }
      }
      return i;
    };
    const char prefix = pos + 1 < n && src_[pos] == '0' ? static_cast<char>(src_[pos + 1] | 0x20) : 0;
    auto try_prefixed = [&](int b, auto&& ok) {
      size_t i = pos + 2;
      if (i < n && src_[i] == '_') ++i;
      if (i >= n || !ok(src_[i])) return false;
      base = b;
      begin = pos + 2;
      end = run(pos + 2, ok);
      return true;
    };
    const bool prefixed = (prefix == 'b' && try_prefixed(2, [](char c) { return c == '0' || c == '1'; })) ||
                          (prefix == 'o' && try_prefixed(8, [](char c) { return c >= '0' && c <= '7'; })) ||
                          (prefix == 'x' && try_prefixed(16, [](char c) { return hex_value(c) >= 0; }));
    if (!prefixed) {
      // A leading zero takes only more zeros, as in jinja ("0(_?0)*").
      end = src_[pos] == '0' ? run(pos + 1, [](char c) { return c == '0'; }) : run(pos + 1, is_digit);
    }
    std::string digits;
    for (size_t i = begin; i < end; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    errno = 0;
    char* stop = nullptr;
    const unsigned long long value = std::strtoull(digits.c_str(), &stop, base);
    if (errno == ERANGE || value > static_cast<unsigned long long>(INT64_MAX)) {
      fail(pos, fmt::format("integer literal {} is too large", src_.substr(pos, end - pos)));
    }
    Token token;
    token.type = TokenType::Integer;
    token.text = src_.substr(pos, end - pos);
    token.integer = static_cast<int64_t>(value);
    token.line = line_at(pos);
    tokens_.push_back(std::move(token));
    return end;
  }

  size_t read_string(size_t pos) {
    const char quote = src_[pos];
    size_t i = pos + 1;
    while (i < src_.size() && src_[i] != quote) i += src_[i] == '\\' ? 2 : 1;
    if (i >= src_.size()) fail(pos, "unterminated string literal");
    Token token;
    token.type = TokenType::String;
    token.text = decode_string(pos, pos + 1, i);
    token.line = line_at(pos);
    tokens_.push_back(std::move(token));
    return i + 1;
  }

  // Jinja decodes a literal with Python's "unicode-escape" codec (after backslash-escaping what is not
  // ASCII): \n \t \\ \' \" \xhh \uhhhh \Uhhhhhhhh \ooo, a backslash-newline disappears, and an unknown
  // escape keeps its backslash.
  std::string decode_string(size_t literal, size_t begin, size_t end) {
    std::string out;
    const std::string_view text(src_.data() + begin, end - begin);
    size_t i = 0;
    auto hex_escape = [&](size_t digits, const char* name) {
      uint32_t value = 0;
      for (size_t k = 0; k < digits; ++k) {
        const int h = i + 1 + k < text.size() ? hex_value(text[i + 1 + k]) : -1;
        if (h < 0) fail(literal, fmt::format("truncated {} escape in a string literal", name));
        value = value * 16 + static_cast<uint32_t>(h);
      }
      if (value > 0x10FFFF) fail(literal, "illegal Unicode character in a string literal");
      if (value >= 0xD800 && value <= 0xDFFF) fail(literal, "a string literal escapes a lone surrogate");
      utf8_append(out, value);
      i += 1 + digits;
    };
    while (i < text.size()) {
      if (text[i] != '\\') {
        out += text[i++];
        continue;
      }
      ++i;  // the escaped character: the literal's pattern guarantees one
      const char c = text[i];
      switch (c) {
        case '\n': ++i; break;
        case '\\':
        case '\'':
        case '"':
          out += c;
          ++i;
          break;
        case 'a':
          out += '\a';
          ++i;
          break;
        case 'b':
          out += '\b';
          ++i;
          break;
        case 'f':
          out += '\f';
          ++i;
          break;
        case 'n':
          out += '\n';
          ++i;
          break;
        case 'r':
          out += '\r';
          ++i;
          break;
        case 't':
          out += '\t';
          ++i;
          break;
        case 'v':
          out += '\v';
          ++i;
          break;
        case 'x': hex_escape(2, "\\xXX"); break;
        case 'u': hex_escape(4, "\\uXXXX"); break;
        case 'U': hex_escape(8, "\\UXXXXXXXX"); break;
        case 'N': fail(literal, "\\N{...} escapes in string literals are not supported");
        default:
          if (c >= '0' && c <= '7') {
            uint32_t value = 0;
            size_t k = 0;
            while (k < 3 && i < text.size() && text[i] >= '0' && text[i] <= '7') {
              value = value * 8 + static_cast<uint32_t>(text[i] - '0');
              ++i;
              ++k;
            }
            utf8_append(out, value);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // The codec saw a backslash before "\xe9" (the escaped form of the character): it keeps
            // one backslash and the escape's letters.
            size_t length = utf8_sequence_length(text, i);
            if (length == 0) length = 1;
            const uint32_t cp = length == 1 ? static_cast<unsigned char>(c) : utf8_decode(text, i, length);
            out += '\\';
            out += cp <= 0xFF     ? fmt::format("x{:02x}", cp)
                   : cp <= 0xFFFF ? fmt::format("u{:04x}", cp)
                                  : fmt::format("U{:08x}", cp);
            i += length;
          } else {
            out += '\\';
            out += c;
            ++i;
          }
      }
    }
    return out;
  }

  size_t read_operator(size_t pos, std::vector<char>& closers) {
    static const char* const kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (at(pos, op)) {
        push(TokenType::Operator, op, pos);
        return pos + 2;
      }
    }
    const char c = src_[pos];
    static const std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      size_t length = utf8_sequence_length(src_, pos);
      if (length == 0) length = 1;
      fail(pos, fmt::format("unexpected character '{}'", src_.substr(pos, length)));
    }
    if (c == '(' || c == '[' || c == '{') {
      closers.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (closers.empty()) fail(pos, fmt::format("unexpected '{}'", c));
      if (closers.back() != c) fail(pos, fmt::format("unexpected '{}', expected '{}'", c, closers.back()));
      closers.pop_back();
    }
    push(TokenType::Operator, std::string(1, c), pos);
    return pos + 1;
  }

  std::string src_;
  std::vector<Token> tokens_;
  bool line_starting_ = true;
  size_t line_cursor_ = 0;
  int line_ = 1;
};

}  // namespace

std::vector<Token> tokenize(const std::string& source) { return Lexer(normalize_newlines(source)).run(); }

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::End: return "end of template";
    case TokenType::Text: return "template text";
    case TokenType::String: return "string literal";
    default: return "'" + token.text + "'";
  }
}

}  // namespace kvc::jinja
