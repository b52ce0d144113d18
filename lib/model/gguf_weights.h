#pragma once
// A GGUF file's tensors under their Hugging Face names (blk.N.attn_q.weight ->
// model.layers.N.self_attn.q_proj.weight, ...), dequantized to the load dtype when asked for. The
// blocks stay in the mapping until then, so a later loader can keep them in block format instead.
#include <memory>

#include "io/gguf_reader.h"
#include "kernels/block_formats.h"
#include "model/weight_source.h"

namespace kvc {

// GGUF's name for a Hugging Face tensor name; "" when there is none.
std::string gguf_tensor_name(const std::string& hf_name, bool gemma_norm_names);

class GgufWeights : public WeightSource {
 public:
  // `qk_interleaved_heads` = {query heads, KV heads} when the q/k rows must be restored to Hugging Face's
  // order (ArchitectureTraits::gguf_qk_rows_interleaved), {0, 0} otherwise.
  GgufWeights(std::shared_ptr<const gguf::GgufFile> file, bool gemma_norm_names, at::ScalarType dtype,
              at::Device device, std::pair<int64_t, int64_t> qk_interleaved_heads = {0, 0});
  bool contains(const std::string& hf_name) const override;
  at::Tensor get(const std::string& hf_name, const std::vector<int64_t>& shape) const override;
  bool norms_include_unit_offset() const override { return gemma_norm_names_; }

  // A matrix's rows as stored in the file, for the block kernels: its format, its bytes in the mapping
  // (valid while file() lives) and, for the q/k rows the converter reorders, where each stored row goes
  // in Hugging Face's order. Throws naming the tensor when it is missing, its shape is not `shape`, or
  // no block kernel reads its type.
  struct StoredRows {
    BlockType type;
    const uint8_t* data;
    int64_t rows;
    std::vector<int32_t> output_rows;
  };
  StoredRows stored_rows(const std::string& hf_name, const std::vector<int64_t>& shape) const;
  // Whether the tensor is in a quantized block format (not F32, F16 or BF16).
  bool is_quantized(const std::string& hf_name) const;
  const std::shared_ptr<const gguf::GgufFile>& file() const { return file_; }

 private:
  const gguf::TensorInfo& checked(const std::string& hf_name, const std::vector<int64_t>& shape) const;
  std::shared_ptr<const gguf::GgufFile> file_;
  bool gemma_norm_names_;
  at::ScalarType dtype_;
  at::Device device_;
  std::pair<int64_t, int64_t> qk_interleaved_heads_;
};

}  // namespace kvc
