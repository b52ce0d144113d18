#include "util/utf8.h"

namespace kvc {
namespace {

// Bounds of the second byte (RFC 3629 table 3-7): they exclude overlongs, surrogates and > U+10FFFF.
bool second_byte_ok(uint8_t lead, uint8_t next) {
  if (lead == 0xE0) return next >= 0xA0 && next <= 0xBF;
  if (lead == 0xED) return next >= 0x80 && next <= 0x9F;
  if (lead == 0xF0) return next >= 0x90 && next <= 0xBF;
  if (lead == 0xF4) return next >= 0x80 && next <= 0x8F;
  return next >= 0x80 && next <= 0xBF;
}

size_t expected_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// How many bytes from `pos` are a valid prefix of one sequence (at least 1 for any byte).
size_t valid_prefix(std::string_view text, size_t pos, size_t* needed) {
  const auto lead = static_cast<uint8_t>(text[pos]);
  *needed = expected_length(lead);
  if (*needed <= 1) return 1;
  size_t n = 1;
  while (n < *needed && pos + n < text.size()) {
    const auto next = static_cast<uint8_t>(text[pos + n]);
    const bool ok = n == 1 ? second_byte_ok(lead, next) : (next >= 0x80 && next <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

void utf8_append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t utf8_sequence_length(std::string_view text, size_t pos) {
  size_t needed = 0;
  const size_t n = valid_prefix(text, pos, &needed);
  return needed != 0 && n == needed ? n : 0;
}

size_t utf8_first_invalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const size_t n = utf8_sequence_length(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return text.size();
}

bool utf8_valid(std::string_view text) { return utf8_first_invalid(text) == text.size(); }

std::string utf8_lossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t needed = 0;
    const size_t n = valid_prefix(text, pos, &needed);
    if (needed != 0 && n == needed) {
      out.append(text.substr(pos, n));
    } else {
      out += "\xEF\xBF\xBD";
    }
    pos += n;
  }
  return out;
}

size_t utf8_incomplete_tail(std::string_view text) {
  // A cut character's lead byte is at most 3 bytes before the end.
  for (size_t back = 1; back <= 3 && back <= text.size(); ++back) {
    const size_t pos = text.size() - back;
    const auto byte = static_cast<uint8_t>(text[pos]);
    if (byte >= 0x80 && byte <= 0xBF) continue;  // continuation: keep looking for the lead
    size_t needed = 0;
    const size_t n = valid_prefix(text, pos, &needed);
    return (needed > back && n == back) ? back : 0;
  }
  return 0;
}

uint32_t utf8_decode(std::string_view text, size_t pos, size_t length) {
  const auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<uint8_t>(text[pos + i])); };
  switch (length) {
    case 1: return byte(0);
    case 2: return ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3: return ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F);
    default: return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
  }
}

std::u32string decode_utf8(const std::string& text) {
  std::u32string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = utf8_sequence_length(text, pos);
    if (length == 0) {
      out.push_back(0xFFFD);
      ++pos;
    } else {
      out.push_back(utf8_decode(text, pos, length));
      pos += length;
    }
  }
  return out;
}

std::string encode_utf8(const std::u32string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) utf8_append(out, c);
  return out;
}

}  // namespace kvc
