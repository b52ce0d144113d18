#include "core/architecture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"

namespace kvc {
namespace {

const std::vector<ArchitectureTraits>& table() {
  static const std::vector<ArchitectureTraits> traits = {
      {"llama", "LlamaForCausalLM", false, false, false, false, false, false, false, false, false, "llama", true},
      {"mistral", "MistralForCausalLM", false, true, false},
      {"qwen2", "Qwen2ForCausalLM", true, false, true, false, false, false, false, false, false, "qwen2"},
      {"gemma3_text", "Gemma3ForCausalLM", false, false, false, true, true, true, true, true, true, "gemma3"},
  };
  return traits;
}

}  // namespace

const ArchitectureTraits& architecture_for(const std::string& model_type, const std::string& source_name) {
  for (const auto& t : table()) {
    if (t.model_type == model_type) return t;
  }
  fail("{}: unsupported model_type '{}' (supported: {})", source_name, model_type,
       fmt::join(supported_model_types(), ", "));
}

const ArchitectureTraits& architecture_for_gguf(const std::string& gguf_architecture, const std::string& source_name) {
  std::vector<std::string> known;
  for (const auto& t : table()) {
    if (!t.gguf_architecture.empty() && t.gguf_architecture == gguf_architecture) return t;
    if (!t.gguf_architecture.empty()) known.push_back(t.gguf_architecture);
  }
  fail("{}: unsupported GGUF architecture '{}' (supported: {})", source_name, gguf_architecture,
       fmt::join(known, ", "));
}

std::vector<std::string> supported_model_types() {
  std::vector<std::string> names;
  for (const auto& t : table()) names.push_back(t.model_type);
  return names;
}

}  // namespace kvc
