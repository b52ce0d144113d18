#pragma once
// A tokenizer.model is checked before libsentencepiece reads it: the library trusts the normalizer's
// precompiled character map (a darts-clone double array and the strings it points at) and reads out
// of bounds, or crashes, on a crafted one. This walks the protobuf's framing and every path through
// the map's trie, so that every read the library's normalizer can make stays inside the blob.
#include <string>

namespace kvc {

// Throws kvc::Error naming `path` and the defect when `bytes` is not a well-framed ModelProto or a
// normalizer's precompiled_charsmap could make libsentencepiece read outside it.
void check_sentencepiece_model(const std::string& bytes, const std::string& path);

}  // namespace kvc
