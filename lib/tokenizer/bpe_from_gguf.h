#pragma once
// The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*): byte-level BPE vocabularies
// ("gpt2"), with tokenizer.ggml.pre naming the pre-tokenizer as llama.cpp does.
#include <memory>
#include <string>

#include "tokenizer/tokenizer_backend.h"

namespace kvc {

// Throws kvc::Error naming the file and the metadata key at fault (missing tokens, an unknown
// tokenizer.ggml.pre, a SentencePiece-style "llama" vocabulary, ...).
std::unique_ptr<TokenizerBackend> load_bpe_from_gguf(const std::string& path);

}  // namespace kvc
