#pragma once
// Where LlamaModel::load takes its tensors from, named as in Hugging Face checkpoints: a safetensors
// folder, or a GGUF file whose tensors are renamed and dequantized (gguf_weights.h).
#include <ATen/ATen.h>

#include <string>
#include <vector>

namespace kvc {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual bool contains(const std::string& hf_name) const = 0;
  // The tensor in the load dtype and device; throws naming it when it is missing or its shape is not `shape`.
  virtual at::Tensor get(const std::string& hf_name, const std::vector<int64_t>& shape) const = 0;
  // True when RMSNorm weights already hold 1 + w (llama.cpp's converter adds the 1 for Gemma).
  virtual bool norms_include_unit_offset() const = 0;
};

}  // namespace kvc
