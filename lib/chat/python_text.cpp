#include "chat/python_text.h"

#include <utf8proc.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/utf8.h"

namespace kvc::py {
namespace {

// A byte that does not start well-formed UTF-8 stands for itself; 0xDC80 + byte keeps it apart from
// real code points (Python's surrogateescape spelling), so it never matches a separator or a case rule.
constexpr uint32_t kLoneByteBase = 0xDC80;

uint32_t decode_at(std::string_view text, size_t pos, size_t& length) {
  length = utf8_sequence_length(text, pos);
  if (length == 0) {
    length = 1;
    return kLoneByteBase + static_cast<unsigned char>(text[pos]);
  }
  return utf8_decode(text, pos, length);
}

void append(std::string& out, uint32_t c) {
  if (c >= kLoneByteBase && c < kLoneByteBase + 0x100) {
    out += static_cast<char>(c - kLoneByteBase);
  } else {
    utf8_append(out, c);
  }
}

bool is_lone_byte(uint32_t c) { return c >= kLoneByteBase && c < kLoneByteBase + 0x100; }

bool is_cased(uint32_t c) {
  if (is_lone_byte(c) || c > 0x10FFFF) return false;
  const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
  if (category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL || category == UTF8PROC_CATEGORY_LT)
    return true;
  const auto cp = static_cast<utf8proc_int32_t>(c);
  return utf8proc_toupper(cp) != cp || utf8proc_tolower(cp) != cp;
}

template <typename Map>
std::string map_chars(std::string_view text, Map&& map) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const uint32_t c = decode_at(text, pos, length);
    append(out, is_lone_byte(c) ? c : map(c));
    pos += length;
  }
  return out;
}

uint32_t to_upper(uint32_t c) { return static_cast<uint32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(c))); }
uint32_t to_lower(uint32_t c) { return static_cast<uint32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))); }
uint32_t to_title(uint32_t c) { return static_cast<uint32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(c))); }

bool in_set(const std::vector<uint32_t>& set, uint32_t c) {
  for (uint32_t s : set) {
    if (s == c) return true;
  }
  return false;
}

std::vector<std::string> split_whitespace(const CodePoints& cp, std::string_view text, int64_t maxsplit) {
  std::vector<std::string> parts;
  const size_t n = cp.chars.size();
  size_t i = 0;
  while (i < n) {
    while (i < n && is_space(cp.chars[i])) ++i;
    if (i == n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The rest, with its trailing whitespace removed, is the last part.
      size_t end = n;
      while (end > i && is_space(cp.chars[end - 1])) --end;
      parts.emplace_back(text.substr(cp.offsets[i], cp.offsets[end] - cp.offsets[i]));
      return parts;
    }
    const size_t start = i;
    while (i < n && !is_space(cp.chars[i])) ++i;
    parts.emplace_back(text.substr(cp.offsets[start], cp.offsets[i] - cp.offsets[start]));
  }
  return parts;
}

std::vector<std::string> rsplit_whitespace(const CodePoints& cp, std::string_view text, int64_t maxsplit) {
  std::vector<std::string> parts;
  size_t i = cp.chars.size();
  while (i > 0) {
    while (i > 0 && is_space(cp.chars[i - 1])) --i;
    if (i == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      size_t begin = 0;
      while (begin < i && is_space(cp.chars[begin])) ++begin;
      parts.emplace_back(text.substr(cp.offsets[begin], cp.offsets[i] - cp.offsets[begin]));
      break;
    }
    const size_t end = i;
    while (i > 0 && !is_space(cp.chars[i - 1])) --i;
    parts.emplace_back(text.substr(cp.offsets[i], cp.offsets[end] - cp.offsets[i]));
  }
  return {parts.rbegin(), parts.rend()};
}

}  // namespace

CodePoints code_points(std::string_view text) {
  CodePoints cp;
  cp.chars.reserve(text.size());
  cp.offsets.reserve(text.size() + 1);
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    cp.offsets.push_back(pos);
    cp.chars.push_back(decode_at(text, pos, length));
    pos += length;
  }
  cp.offsets.push_back(text.size());
  return cp;
}

size_t length(std::string_view text) {
  size_t n = 0;
  for (size_t pos = 0; pos < text.size(); ++n) {
    const size_t length = utf8_sequence_length(text, pos);
    pos += length == 0 ? 1 : length;
  }
  return n;
}

bool is_space(uint32_t c) {
  switch (c) {
    case 0x09:
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x1F:
    case 0x20:
    case 0x85:
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000: return true;
    default: return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_line_break(uint32_t c) {
  switch (c) {
    case 0x0A:
    case 0x0B:
    case 0x0C:
    case 0x0D:
    case 0x1C:
    case 0x1D:
    case 0x1E:
    case 0x85:
    case 0x2028:
    case 0x2029: return true;
    default: return false;
  }
}

bool is_printable(uint32_t c) {
  if (c == ' ') return true;
  if (is_lone_byte(c) || c > 0x10FFFF) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS: return false;
    default: return true;
  }
}

bool str_is(std::string_view text, CharTest test) {
  const CodePoints cp = code_points(text);
  if (cp.chars.empty()) return false;
  if (test == CharTest::Upper || test == CharTest::Lower) {
    // At least one cased character, none of the other case, and no titlecase letter.
    bool cased = false;
    for (uint32_t c : cp.chars) {
      if (is_lone_byte(c)) continue;
      const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
      if (category == UTF8PROC_CATEGORY_LT) return false;
      if (category == UTF8PROC_CATEGORY_LU) {
        if (test == CharTest::Lower) return false;
        cased = true;
      } else if (category == UTF8PROC_CATEGORY_LL) {
        if (test == CharTest::Upper) return false;
        cased = true;
      }
    }
    return cased;
  }
  for (uint32_t c : cp.chars) {
    if (is_lone_byte(c)) return false;
    const auto category = utf8proc_category(static_cast<utf8proc_int32_t>(c));
    const bool alpha = category >= UTF8PROC_CATEGORY_LU && category <= UTF8PROC_CATEGORY_LO;
    const bool decimal = category == UTF8PROC_CATEGORY_ND;
    const bool numeric = decimal || category == UTF8PROC_CATEGORY_NL || category == UTF8PROC_CATEGORY_NO;
    bool ok = false;
    switch (test) {
      case CharTest::Alpha: ok = alpha; break;
      case CharTest::Digit:
        ok = decimal || (category == UTF8PROC_CATEGORY_NO && (c == 0xB2 || c == 0xB3 || c == 0xB9));
        break;
      case CharTest::Decimal: ok = decimal; break;
      case CharTest::Numeric: ok = numeric; break;
      case CharTest::Alnum: ok = alpha || numeric; break;
      case CharTest::Space: ok = is_space(c); break;
      default: break;
    }
    if (!ok) return false;
  }
  return true;
}

std::string upper(std::string_view text) { return map_chars(text, to_upper); }
std::string lower(std::string_view text) { return map_chars(text, to_lower); }

std::string title(std::string_view text) {
  bool previous_is_cased = false;
  return map_chars(text, [&](uint32_t c) {
    const uint32_t mapped = previous_is_cased ? to_lower(c) : to_title(c);
    previous_is_cased = is_cased(c);
    return mapped;
  });
}

std::string capitalize(std::string_view text) {
  bool first = true;
  return map_chars(text, [&](uint32_t c) {
    const uint32_t mapped = first ? to_title(c) : to_lower(c);
    first = false;
    return mapped;
  });
}

std::string strip(std::string_view text, const std::optional<std::string>& chars, bool left, bool right) {
  // Scans in from both ends only: trim runs on every message, some of them megabytes long.
  std::vector<uint32_t> set;
  if (chars) set = code_points(*chars).chars;
  auto strippable = [&](uint32_t c) { return chars ? in_set(set, c) : is_space(c); };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end) {
      size_t length = 0;
      const uint32_t c = decode_at(text, begin, length);
      if (!strippable(c)) break;
      begin += length;
    }
  }
  if (right) {
    while (end > begin) {
      // The character ending at `end`: a well-formed sequence of 1-4 bytes, else one lone byte.
      size_t start = end - 1;
      while (start > begin && end - start < 4 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
      size_t length = 0;
      uint32_t c = decode_at(text, start, length);
      if (start + length != end) {
        start = end - 1;
        c = kLoneByteBase + static_cast<unsigned char>(text[start]);
      }
      if (!strippable(c)) break;
      end = start;
    }
  }
  return std::string(text.substr(begin, end - begin));
}

std::vector<std::string> split(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return split_whitespace(code_points(text), text, maxsplit);
  std::vector<std::string> parts;
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t found = text.find(*sep, start);
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(start, found - start));
    start = found + sep->size();
  }
  parts.emplace_back(text.substr(start));
  return parts;
}

std::vector<std::string> rsplit(std::string_view text, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (!sep) return rsplit_whitespace(code_points(text), text, maxsplit);
  std::vector<std::string> parts;
  size_t end = text.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < sep->size()) break;
    const size_t found = text.rfind(*sep, end - sep->size());
    if (found == std::string_view::npos) break;
    parts.emplace_back(text.substr(found + sep->size(), end - found - sep->size()));
    end = found;
  }
  parts.emplace_back(text.substr(0, end));
  return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> splitlines(std::string_view text, bool keepends) {
  const CodePoints cp = code_points(text);
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t i = 0; i < cp.chars.size(); ++i) {
    if (!is_line_break(cp.chars[i])) continue;
    size_t next = i + 1;
    if (cp.chars[i] == '\r' && next < cp.chars.size() && cp.chars[next] == '\n') ++next;
    const size_t end = keepends ? cp.offsets[next] : cp.offsets[i];
    lines.emplace_back(text.substr(cp.offsets[start], end - cp.offsets[start]));
    start = next;
    i = next - 1;
  }
  if (start < cp.chars.size()) lines.emplace_back(text.substr(cp.offsets[start]));
  return lines;
}

std::string replace(std::string_view text, std::string_view old, std::string_view replacement, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    const CodePoints cp = code_points(text);
    int64_t done = 0;
    for (size_t i = 0; i <= cp.chars.size(); ++i) {
      if (count < 0 || done < count) {
        out += replacement;
        ++done;
      }
      if (i < cp.chars.size()) out += text.substr(cp.offsets[i], cp.offsets[i + 1] - cp.offsets[i]);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t found = text.find(old, start);
    if (found == std::string_view::npos) break;
    out += text.substr(start, found - start);
    out += replacement;
    start = found + old.size();
    ++done;
  }
  out += text.substr(start);
  return out;
}

int64_t count(std::string_view text, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(length(text)) + 1;
  int64_t n = 0;
  for (size_t pos = text.find(sub); pos != std::string_view::npos; pos = text.find(sub, pos + sub.size())) ++n;
  return n;
}

std::string repr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buffer[16];
  for (size_t pos = 0; pos < text.size();) {
    size_t length = 0;
    const uint32_t c = decode_at(text, pos, length);
    pos += length;
    if (c == static_cast<uint32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (is_lone_byte(c)) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c - kLoneByteBase);
      out += buffer;
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      out += buffer;
    } else if (c < 0x7F || is_printable(c)) {
      utf8_append(out, c);
    } else {
      if (c <= 0xFF) {
        std::snprintf(buffer, sizeof buffer, "\\x%02x", c);
      } else if (c <= 0xFFFF) {
        std::snprintf(buffer, sizeof buffer, "\\u%04x", c);
      } else {
        std::snprintf(buffer, sizeof buffer, "\\U%08x", c);
      }
      out += buffer;
    }
  }
  out += quote;
  return out;
}

std::string float_repr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  // The shortest digits that read back as `value` (what Python's repr picks), then Python's layout:
  // positional for decimal exponents -4..15, scientific with a two-digit exponent otherwise.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<size_t>(exponent) + 1 >= digits.size()) {
      out = digits + std::string(static_cast<size_t>(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out =
          digits.substr(0, static_cast<size_t>(exponent) + 1) + "." + digits.substr(static_cast<size_t>(exponent) + 1);
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  std::snprintf(buffer, sizeof buffer, "e%c%02d", exponent < 0 ? '-' : '+', exponent < 0 ? -exponent : exponent);
  return sign + mantissa + buffer;
}

std::string int_str(int64_t value) { return std::to_string(value); }

}  // namespace kvc::py
