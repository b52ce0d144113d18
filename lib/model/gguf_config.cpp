#include "model/gguf_config.h"

#include <fmt/format.h>

#include <cmath>

#include "core/gemma3_config.h"
#include "util/error.h"
#include "util/hash.h"

namespace kvc {
namespace {

// llama.cpp fixes these for Gemma 3 in code rather than in the file: every sixth layer is global and
// local layers use RoPE base 10000.
constexpr int64_t kGemma3LayerPattern = 6;
constexpr double kGemma3LocalRopeBase = 10000.0;
constexpr int64_t kMaxSize = int64_t{1} << 24;

int64_t positive(const gguf::GgufFile& f, const std::string& key) {
  const uint64_t v = f.get_u64(key);
  KVC_CHECK(v > 0 && v <= static_cast<uint64_t>(kMaxSize), "'{}': metadata key '{}' is {}, expected 1..{}", f.path(),
            key, v, kMaxSize);
  return static_cast<int64_t>(v);
}

}  // namespace

ModelConfig model_config_from_gguf(const gguf::GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  ModelConfig c;
  c.traits = architecture_for_gguf(arch, "'" + f.path() + "'");
  c.model_type = c.traits.model_type;
  const std::string p = arch + ".";
  c.hidden_size = positive(f, p + "embedding_length");
  c.intermediate_size = positive(f, p + "feed_forward_length");
  c.num_layers = positive(f, p + "block_count");
  c.num_heads = positive(f, p + "attention.head_count");
  c.num_kv_heads = f.has(p + "attention.head_count_kv") ? positive(f, p + "attention.head_count_kv") : c.num_heads;
  c.head_dim =
      f.has(p + "attention.key_length") ? positive(f, p + "attention.key_length") : c.hidden_size / c.num_heads;
  if (f.has(p + "attention.value_length")) {
    KVC_CHECK(positive(f, p + "attention.value_length") == c.head_dim,
              "'{}': {}attention.value_length differs from key_length; kvc needs them equal", f.path(), p);
  }
  KVC_CHECK(c.num_heads % c.num_kv_heads == 0,
            "'{}': {}attention.head_count ({}) is not a multiple of head_count_kv "
            "({})",
            f.path(), p, c.num_heads, c.num_kv_heads);
  KVC_CHECK(c.head_dim % 2 == 0, "'{}': {}attention.key_length ({}) must be even for RoPE", f.path(), p, c.head_dim);
  c.max_position_embeddings = positive(f, p + "context_length");
  c.rms_norm_eps = f.get_f32(p + "attention.layer_norm_rms_epsilon");
  KVC_CHECK(c.rms_norm_eps > 0 && c.rms_norm_eps < 1, "'{}': {}attention.layer_norm_rms_epsilon is {}, outside (0, 1)",
            f.path(), p, c.rms_norm_eps);
  c.rope_theta = f.has(p + "rope.freq_base") ? f.get_f32(p + "rope.freq_base") : 10000.0;
  KVC_CHECK(std::isfinite(c.rope_theta) && c.rope_theta > 1 && c.rope_theta <= kMaxRopeTheta,
            "'{}': {}rope.freq_base is {}, outside (1, {:g}] (config.json's rope_theta range)", f.path(), p,
            c.rope_theta, kMaxRopeTheta);
  if (f.has(p + "rope.scaling.type")) {
    const std::string type = f.get_string(p + "rope.scaling.type");
    KVC_CHECK(type == "none" || type == "linear", "'{}': {}rope.scaling.type '{}' is not supported (none, linear)",
              f.path(), p, type);
    if (type == "linear") {
      c.rope_scaling.type = "linear";
      c.rope_scaling.factor = f.get_f32(p + "rope.scaling.factor");
      KVC_CHECK(c.rope_scaling.factor > 0, "'{}': {}rope.scaling.factor must be positive", f.path(), p);
    }
  }
  if (f.has_tensor("rope_freqs.weight")) {  // llama3 scaling, precomputed per frequency by llama.cpp's converter
    const gguf::TensorInfo& t = f.tensor("rope_freqs.weight");
    KVC_CHECK(t.type == 0 && t.elements() == static_cast<uint64_t>(c.head_dim / 2) && t.data != nullptr,
              "'{}': rope_freqs.weight must be {} float32 values (head_dim / 2)", f.path(), c.head_dim / 2);
    const auto* values = reinterpret_cast<const float*>(t.data);
    for (int64_t i = 0; i < c.head_dim / 2; ++i) {
      KVC_CHECK(std::isfinite(values[i]) && values[i] > 0, "'{}': rope_freqs.weight[{}] is {}, not a positive number",
                f.path(), i, values[i]);
      c.rope_scaling.frequency_divisors.push_back(values[i]);
    }
  }
  const auto& tokens = f.get_string_array("tokenizer.ggml.tokens");
  c.vocab_size = static_cast<int64_t>(tokens.size());
  const auto token_id = [&](const char* key) {
    const uint32_t id = f.get_u32(key);
    KVC_CHECK(id < tokens.size(), "'{}': {} is {}, outside the vocabulary of {} tokens", f.path(), key, id,
              tokens.size());
    return static_cast<int>(id);
  };
  if (f.has("tokenizer.ggml.bos_token_id")) c.bos_token_id = token_id("tokenizer.ggml.bos_token_id");
  if (f.has("tokenizer.ggml.eos_token_id")) c.eos_token_ids = {token_id("tokenizer.ggml.eos_token_id")};
  // Generation ends at any end-of-turn or end-of-text token, as llama.cpp's end-of-generation set: an
  // instruct model ends its answer with its chat format's end of turn, which is often not the file's EOS
  // (Gemma's <end_of_turn>; SmolLM2's EOS is <|im_end|>, and it may also write <|endoftext|>).
  for (const char* key : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (f.has(key)) c.add_stop_ids({static_cast<int>(f.get_u32(key))}, f.path() + ": " + key);
  }
  static const char* const kEndOfGeneration[] = {"<|eot_id|>",    "<|im_end|>", "<|end|>", "<end_of_turn>",
                                                 "<|endoftext|>", "<|eom_id|>", "<EOT>",   "<|end_of_text|>"};
  for (size_t id = 0; id < tokens.size(); ++id) {
    for (const char* name : kEndOfGeneration) {
      if (tokens[id] == name && !c.is_eos(static_cast<int>(id))) c.eos_token_ids.push_back(static_cast<int>(id));
    }
  }
  c.tie_word_embeddings = !f.has_tensor("output.weight");
  c.qkv_bias = c.traits.always_qkv_bias || f.has_tensor("blk.0.attn_q.bias");
  if (c.traits.local_global_layers) {
    c.local_window = positive(f, p + "attention.sliding_window");
    c.local_layers = gemma3_local_layers(c.num_layers, kGemma3LayerPattern);
    c.rope_local_theta = kGemma3LocalRopeBase;
    c.query_pre_attn_scalar = static_cast<double>(c.head_dim);
  }
  // 16-bit files stay 16-bit in memory; block-quantized ones are dequantized to fp32 by default.
  const gguf::GgmlTypeInfo* embedding =
      f.has_tensor("token_embd.weight") ? gguf::ggml_type_info(f.tensor("token_embd.weight").type) : nullptr;
  const std::string stored = embedding ? embedding->name : "";
  c.torch_dtype = stored == "F16" ? "float16" : stored == "BF16" ? "bfloat16" : "float32";
  c.config_hash = hash_string(fmt::format("gguf:{}:{}:{}:{}:{}:{}:{}", arch, c.hidden_size, c.num_layers, c.num_heads,
                                          c.head_dim, c.vocab_size, f.file_size()));
  return c;
}

}  // namespace kvc
