#pragma once
// The config.json fields of Gemma 3 (model_type "gemma3_text") beyond those every Llama shares.
#include <nlohmann/json.hpp>

#include <string>

#include "core/model_config.h"

namespace kvc {

// Local/global layer pattern, local RoPE base, query scaling; refuses the soft-capping and activation
// settings kvc does not compute. Throws naming the file and the field.
void read_gemma3_fields(const nlohmann::json& j, ModelConfig& c, const std::string& src);

// Gemma 3 makes every `pattern`-th layer global (layers pattern-1, 2*pattern-1, ...), the others local.
std::vector<bool> gemma3_local_layers(int64_t num_layers, int64_t pattern);

}  // namespace kvc
