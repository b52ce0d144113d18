#pragma once
// UTF-8 <-> code points. Metrics compare characters the way Python's str does (LongBench and RULER are
// Python), so "é" counts as one character in an edit distance, not two bytes.
#include <string>

namespace kvc {

// Each byte that is not part of valid UTF-8 becomes U+FFFD, so scoring never throws on model output.
std::u32string decode_utf8(const std::string& text);
std::string encode_utf8(const std::u32string& text);

}  // namespace kvc
