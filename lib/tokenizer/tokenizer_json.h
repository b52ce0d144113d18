#pragma once
// Hugging Face tokenizer.json files of byte-level BPE models (GPT-2, Llama 3, Qwen 2 families).
#include <memory>
#include <string>

#include "tokenizer/tokenizer_backend.h"

namespace kvc {

// Reads the file and, when they sit beside it, tokenizer_config.json (bos_token/eos_token) and
// generation_config.json (eos_token_id). Throws kvc::Error naming the file and the field at fault.
std::unique_ptr<TokenizerBackend> load_tokenizer_json(const std::string& path);

// True when the file describes a byte-level BPE (its pre-tokenizer or decoder is ByteLevel). A Llama-2
// era tokenizer.json (SentencePiece-style BPE with byte fallback) is not: its tokenizer.model serves.
bool tokenizer_json_is_byte_level(const std::string& path);

}  // namespace kvc
