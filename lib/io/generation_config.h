#pragma once
// Hugging Face's generation_config.json: the token ids that begin a prompt and end generation. An
// instruct model often lists more end ids here (its end-of-turn token) than config.json names.
#include <optional>
#include <string>
#include <vector>

namespace kvc {

struct GenerationConfig {
  std::optional<int> bos_id;
  std::vector<int> eos_ids;  // empty when the file names none
};

// Throws kvc::Error naming the file and the field when a listed id is not a non-negative 32-bit integer.
GenerationConfig read_generation_config(const std::string& path);

}  // namespace kvc
