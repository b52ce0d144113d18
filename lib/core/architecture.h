#pragma once
// The architecture table: each supported Hugging Face model_type and how it departs from Llama.
#include <string>
#include <vector>

namespace kvc {

struct ArchitectureTraits {
  std::string model_type;               // "llama", "mistral", "qwen2", "gemma3_text"
  std::string hf_class;                 // e.g. "LlamaForCausalLM"
  bool always_qkv_bias = false;         // Qwen2 has q/k/v biases whatever config says
  bool honours_sliding_window = false;  // Mistral applies config.sliding_window
  bool sliding_window_flag = false;     // Qwen2 only when use_sliding_window is true
  // Gemma 3's departures, each a separate fact so that the forward pass reads as what it computes.
  bool unit_offset_norms = false;    // RMSNorm scales by (1 + w); kvc stores 1 + w at load
  bool sandwich_norms = false;       // RMSNorm after attention and after the MLP as well as before
  bool qk_norms = false;             // per-head RMSNorm of queries and keys before RoPE
  bool gelu_tanh_mlp = false;        // GeGLU with tanh-approximated GELU instead of SwiGLU
  bool scaled_embeddings = false;    // embeddings multiplied by sqrt(hidden_size)
  bool local_global_layers = false;  // sliding-window layers interleaved with global ones
  std::string gguf_architecture;     // general.architecture of its GGUF files ("" when not read)
  // llama.cpp's converter reorders the rows of each q/k head (HF's two RoPE halves interleaved, as its
  // RoPE expects) for this architecture; kvc restores the Hugging Face order at load.
  bool gguf_qk_rows_interleaved = false;
};

// Throws kvc::Error listing the supported types when model_type is unknown.
const ArchitectureTraits& architecture_for(const std::string& model_type, const std::string& source_name);
// The same for a GGUF file's general.architecture.
const ArchitectureTraits& architecture_for_gguf(const std::string& gguf_architecture, const std::string& source_name);
std::vector<std::string> supported_model_types();

}  // namespace kvc
