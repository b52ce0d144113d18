#pragma once
// Hugging Face config.json -> the one model description the runtime understands. Architectures differ
// only in a few traits (see architecture.h), never in copies of the forward pass.
#include <cstdint>
#include <string>
#include <vector>

#include "core/architecture.h"
#include "core/attention_shape.h"

namespace kvc {

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
  // Per-frequency divisors of the inverse frequencies (head_dim / 2 of them): the form llama.cpp stores
  // llama3 scaling in a GGUF (tensor rope_freqs.weight). Applied instead of `type` when not empty.
  std::vector<double> frequency_divisors;
};

// Long-context Llama variants reach rope_theta ~4e9; 1e12 leaves room for those and refuses values
// (1e30) at which every RoPE frequency rounds to zero and positions become indistinguishable. The
// same bound for config.json's rope_theta and GGUF's rope.freq_base.
constexpr double kMaxRopeTheta = 1e12;

struct ModelConfig {
  std::string model_type;
  ArchitectureTraits traits;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;
  int64_t sliding_window = 0;  // 0: full attention
  // Local/global layers (Gemma 3): local layers attend to the last `local_window` tokens with their own
  // RoPE base; `sliding_window` above and rope_theta/rope_scaling describe the global layers, which are
  // the layers compression acts on.
  std::vector<bool> local_layers;  // empty: no local layers
  int64_t local_window = 0;
  double rope_local_theta = 10000.0;
  double query_pre_attn_scalar = 0;  // queries scaled by 1/sqrt(this); 0: head_dim
  int bos_token_id = 1;
  std::vector<int> eos_token_ids{2};
  std::string torch_dtype = "float32";
  std::string config_hash;  // hash of config.json, recorded in every artifact made for this model

  int64_t kv_dim() const { return num_kv_heads * head_dim; }
  int64_t group_size() const { return attention_shape().group_size(); }
  // The layout of the global layers' attention (the layers compression acts on).
  AttentionShape attention_shape() const { return {num_heads, num_kv_heads, head_dim, sliding_window}; }
  // The layout of the local layers' attention: the same heads over the last `local_window` tokens.
  AttentionShape local_attention_shape() const { return {num_heads, num_kv_heads, head_dim, local_window}; }
  bool is_eos(int id) const;
  bool is_local_layer(int64_t layer) const {
    return layer >= 0 && layer < static_cast<int64_t>(local_layers.size()) && local_layers[static_cast<size_t>(layer)];
  }

  // Parses and validates; throws kvc::Error naming the file and the missing or bad field.
  static ModelConfig from_file(const std::string& config_path);
  // Adds ids that end generation (e.g. generation_config.json's); throws kvc::Error naming `source`
  // when one is outside the vocabulary.
  void add_stop_ids(const std::vector<int>& ids, const std::string& source);
  static ModelConfig from_json_text(const std::string& text, const std::string& source_name);
};

}  // namespace kvc
