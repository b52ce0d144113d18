#include "tokenizer/byte_unicode.h"

#include <array>

#include "util/utf8.h"

namespace kvc {
namespace {

struct ByteAlphabet {
  std::array<std::string, 256> symbol;
  std::array<int, 324> byte_of;  // code points 0..323 cover the whole alphabet

  ByteAlphabet() {
    byte_of.fill(-1);
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? static_cast<uint32_t>(b) : next_extra++;
      utf8_append(symbol[b], cp);
      byte_of[cp] = b;
    }
  }
};

const ByteAlphabet& alphabet() {
  static const ByteAlphabet instance;
  return instance;
}

}  // namespace

const std::string& byte_to_symbol(uint8_t byte) { return alphabet().symbol[byte]; }

int symbol_to_byte(uint32_t code_point) {
  const auto& table = alphabet().byte_of;
  return code_point < table.size() ? table[code_point] : -1;
}

bool symbols_to_bytes(std::string_view token, std::string& out) {
  std::string bytes;
  size_t pos = 0;
  while (pos < token.size()) {
    const size_t n = utf8_sequence_length(token, pos);
    if (n == 0) return false;
    const int byte = symbol_to_byte(utf8_decode(token, pos, n));
    if (byte < 0) return false;
    bytes += static_cast<char>(byte);
    pos += n;
  }
  out += bytes;
  return true;
}

}  // namespace kvc
