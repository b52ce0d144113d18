#pragma once
// UTF-8 helpers shared by the tokenizers and the metrics: validation, the replacement the reference
// libraries apply, code point walking, and whole-string conversion to and from code points.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvc {

// Appends the UTF-8 encoding of `code_point`.
void utf8_append(std::string& out, uint32_t code_point);
// Length of the well-formed sequence starting at `text[pos]`, or 0 if it is not one.
size_t utf8_sequence_length(std::string_view text, size_t pos);
bool utf8_valid(std::string_view text);
// Offset of the first byte that does not start a well-formed sequence; text.size() if none.
size_t utf8_first_invalid(std::string_view text);
// Each maximal ill-formed subpart becomes U+FFFD, as Rust's String::from_utf8_lossy and Python do.
std::string utf8_lossy(std::string_view text);
// Bytes at the end that begin a multi-byte character the text does not finish (0, 1, 2 or 3).
size_t utf8_incomplete_tail(std::string_view text);
// Decodes the code point of the well-formed sequence at `text[pos]` of length `length`.
uint32_t utf8_decode(std::string_view text, size_t pos, size_t length);

// Whole strings as code points. Metrics compare characters the way Python's str does (LongBench and
// RULER are Python), so "é" counts as one character in an edit distance, not two bytes. Each byte that
// is not part of well-formed UTF-8 becomes U+FFFD, so scoring never throws on model output.
std::u32string decode_utf8(const std::string& text);
std::string encode_utf8(const std::u32string& text);

}  // namespace kvc
