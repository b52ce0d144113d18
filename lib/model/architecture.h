#pragma once
// The architecture table: each supported Hugging Face model_type and how it departs from Llama.
#include <string>
#include <vector>

namespace kvc {

struct ArchitectureTraits {
  std::string model_type;           // "llama", "mistral", "qwen2"
  std::string hf_class;             // e.g. "LlamaForCausalLM"
  bool always_qkv_bias = false;     // Qwen2 has q/k/v biases whatever config says
  bool honours_sliding_window = false;  // Mistral applies config.sliding_window
  bool sliding_window_flag = false;     // Qwen2 only when use_sliding_window is true
};

// Throws kvc::Error listing the supported types when model_type is unknown.
const ArchitectureTraits& architecture_for(const std::string& model_type, const std::string& source_name);
std::vector<std::string> supported_model_types();

}  // namespace kvc
