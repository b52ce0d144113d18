#pragma once
// SentencePiece models (tokenizer.model), reached through libkvc_spm.so opened with dlopen(RTLD_DEEPBIND)
// so that sentencepiece's private protobuf never meets LibTorch's.
#include <memory>
#include <string>

#include "tokenizer/tokenizer_backend.h"

namespace kvc {

// Throws kvc::Error if the file is missing or not a SentencePiece model.
std::unique_ptr<TokenizerBackend> load_sentencepiece(const std::string& model_path);

}  // namespace kvc
