#pragma once
// A GGUF file's metadata (llama.cpp's "<arch>.*" keys) -> ModelConfig, the same description that a
// config.json gives. Only architectures in the table with a gguf_architecture are read.
#include "core/model_config.h"
#include "io/gguf_reader.h"

namespace kvc {

// Throws naming the file and the key at fault, or the unsupported architecture.
ModelConfig model_config_from_gguf(const gguf::GgufFile& file);

}  // namespace kvc
