#include "tokenizer/normalizer.h"

#include <utf8proc.h>

#include <cstdlib>

#include "util/error.h"

namespace kvc {

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(text);  // ASCII is always in NFC
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &composed, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  KVC_CHECK(length >= 0, "cannot normalize the text to NFC: {}", utf8proc_errmsg(length));
  std::string out(reinterpret_cast<const char*>(composed), static_cast<size_t>(length));
  std::free(composed);
  return out;
}

}  // namespace kvc
