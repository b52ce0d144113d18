#pragma once
// Unicode normalization for tokenizers whose files ask for it (Qwen 2's "NFC"), through utf8proc.
#include <string>
#include <string_view>

namespace kvc {

// Canonical composition (NFC) of valid UTF-8: "e" + U+0301 becomes "é".
std::string nfc(std::string_view text);

}  // namespace kvc
