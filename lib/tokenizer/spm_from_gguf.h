#pragma once
// The SentencePiece-style vocabulary a GGUF file carries (tokenizer.ggml.model "llama": tokens, scores,
// token types), encoded as llama.cpp's SPM tokenizer does: spaces become U+2581, user-defined tokens
// are matched whole first, then the adjacent pair whose merge is the highest-scoring token merges
// until none is left, and what no token covers falls back to <0xXX> byte tokens.
#include <memory>
#include <string>

#include "io/gguf_reader.h"
#include "tokenizer/tokenizer_backend.h"

namespace kvc {

// Throws kvc::Error naming the file and the metadata key at fault.
std::unique_ptr<TokenizerBackend> load_spm_from_gguf(const gguf::GgufFile& file);

}  // namespace kvc
