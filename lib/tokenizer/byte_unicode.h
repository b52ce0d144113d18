#pragma once
// GPT-2's byte-level alphabet: every byte gets a printable code point (printable Latin-1 bytes keep
// their own, the rest move to U+0100 and up), so byte-level BPE vocabularies are plain text.
#include <cstdint>
#include <string>
#include <string_view>

namespace kvc {

// UTF-8 of the code point that stands for `byte` ("Ġ" for a space).
const std::string& byte_to_symbol(uint8_t byte);
// The byte a code point stands for, or -1 if it is not in the alphabet.
int symbol_to_byte(uint32_t code_point);
// A vocabulary token's bytes; false (and `out` unchanged) if a character is outside the alphabet.
bool symbols_to_bytes(std::string_view token, std::string& out);

}  // namespace kvc
