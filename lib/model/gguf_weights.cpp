#include "model/gguf_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <regex>

#include "io/gguf_dequant.h"
#include "util/error.h"

namespace kvc {

std::string gguf_tensor_name(const std::string& hf_name, bool gemma_norm_names) {
  if (hf_name == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf_name == "model.norm.weight") return "output_norm.weight";
  if (hf_name == "lm_head.weight") return "output.weight";
  static const std::regex layer(R"(model\.layers\.(\d+)\.(.+))");
  std::smatch m;
  if (!std::regex_match(hf_name, m, layer)) return "";
  const std::string block = "blk." + m[1].str() + ".";
  const std::string rest = m[2].str();
  // Llama's post_attention_layernorm is the norm before the MLP; Gemma's is the one after attention.
  const std::pair<const char*, const char*> names[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"post_attention_layernorm.weight", gemma_norm_names ? "post_attention_norm.weight" : "ffn_norm.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"},
  };
  for (const auto& [hf, gg] : names) {
    if (rest == hf) return block + gg;
  }
  return "";
}

GgufWeights::GgufWeights(std::shared_ptr<const gguf::GgufFile> file, bool gemma_norm_names, at::ScalarType dtype,
                         at::Device device, std::pair<int64_t, int64_t> qk_interleaved_heads)
    : file_(std::move(file)),
      gemma_norm_names_(gemma_norm_names),
      dtype_(dtype),
      device_(device),
      qk_interleaved_heads_(qk_interleaved_heads) {}

namespace {

// llama.cpp's converter stores each head's rows [first half | second half] of the rotary pairs as
// interleaved pairs (row i of the first half next to row i of the second); this undoes it.
at::Tensor deinterleave_heads(const at::Tensor& w, int64_t heads) {
  const int64_t rows = w.size(0), half = rows / heads / 2;
  return w.reshape({heads, half, 2, w.size(1)}).transpose(1, 2).reshape({rows, w.size(1)}).contiguous();
}

}  // namespace

bool GgufWeights::contains(const std::string& hf_name) const {
  const std::string name = gguf_tensor_name(hf_name, gemma_norm_names_);
  return !name.empty() && file_->has_tensor(name);
}

const gguf::TensorInfo& GgufWeights::checked(const std::string& hf_name, const std::vector<int64_t>& shape) const {
  const std::string name = gguf_tensor_name(hf_name, gemma_norm_names_);
  KVC_CHECK(!name.empty() && file_->has_tensor(name), "'{}': missing tensor '{}' (Hugging Face '{}')", file_->path(),
            name.empty() ? hf_name : name, hf_name);
  const gguf::TensorInfo& info = file_->tensor(name);
  // ggml lists the contiguous dimension first; PyTorch last.
  std::vector<int64_t> torch_shape(info.shape.rbegin(), info.shape.rend());
  KVC_CHECK(torch_shape == shape, "'{}': tensor '{}' has shape [{}], but the metadata implies [{}]", file_->path(),
            name, fmt::join(torch_shape, ", "), fmt::join(shape, ", "));
  KVC_CHECK(gguf::can_dequantize(info.type), "'{}': tensor '{}' has type {}, which kvc cannot dequantize",
            file_->path(), name, gguf::ggml_type_info(info.type) ? gguf::ggml_type_info(info.type)->name : "unknown");
  return info;
}

bool GgufWeights::is_quantized(const std::string& hf_name) const {
  const std::string name = gguf_tensor_name(hf_name, gemma_norm_names_);
  if (name.empty() || !file_->has_tensor(name)) return false;
  const BlockFormat* f = block_format(file_->tensor(name).type);
  return f != nullptr && f->values > 1;
}

GgufWeights::StoredRows GgufWeights::stored_rows(const std::string& hf_name, const std::vector<int64_t>& shape) const {
  const gguf::TensorInfo& info = checked(hf_name, shape);
  const BlockFormat* f = block_format(info.type);
  // Every type kvc dequantizes has a block kernel; this guards a type added to one and not the other.
  KVC_CHECK(f != nullptr && shape.size() == 2 && shape[1] % f->values == 0,
            "'{}': tensor '{}' of type {} has no block kernel; pass --dtype float32 to dequantize it at load",
            file_->path(), info.name, gguf::ggml_type_info(info.type)->name);
  StoredRows out{f->type, info.data, shape[0], {}};
  const auto [heads, kv_heads] = qk_interleaved_heads_;
  const int64_t reordered = hf_name.find("self_attn.q_proj.weight") != std::string::npos   ? heads
                            : hf_name.find("self_attn.k_proj.weight") != std::string::npos ? kv_heads
                                                                                           : 0;
  if (reordered > 0) {
    // The inverse of deinterleave_heads below: stored row (head, i, s) is output row (head, s, i).
    const int64_t half = shape[0] / reordered / 2;
    out.output_rows.resize(static_cast<size_t>(shape[0]));
    for (int64_t h = 0; h < reordered; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        for (int64_t s = 0; s < 2; ++s) {
          out.output_rows[static_cast<size_t>(h * 2 * half + i * 2 + s)] =
              static_cast<int32_t>(h * 2 * half + s * half + i);
        }
      }
    }
  }
  return out;
}

at::Tensor GgufWeights::get(const std::string& hf_name, const std::vector<int64_t>& shape) const {
  const gguf::TensorInfo& info = checked(hf_name, shape);
  at::Tensor out = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  gguf::dequantize(info.type, info.data, info.elements(), out.data_ptr<float>());
  const auto [heads, kv_heads] = qk_interleaved_heads_;
  if (heads > 0 && out.dim() == 2) {
    if (hf_name.find("self_attn.q_proj.weight") != std::string::npos) out = deinterleave_heads(out, heads);
    if (hf_name.find("self_attn.k_proj.weight") != std::string::npos) out = deinterleave_heads(out, kv_heads);
  }
  return out.to(device_, dtype_);
}

}  // namespace kvc
