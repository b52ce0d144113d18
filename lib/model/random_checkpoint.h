#pragma once
// Random-weight checkpoints of any Llama shape, in Hugging Face layout: for benchmarks at sizes we do
// not ship, and for tests of architecture variants (GQA, Qwen2 biases, Mistral windows, RoPE scaling).
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace kvc {

struct CheckpointShape {
  std::string model_type = "llama";
  int64_t hidden_size = 768;
  int64_t intermediate_size = 2048;
  int64_t num_layers = 12;
  int64_t num_heads = 12;
  int64_t num_kv_heads = 12;
  int64_t head_dim = 64;
  int64_t vocab_size = 32000;
  int64_t max_position_embeddings = 8192;
  double rope_theta = 10000.0;
  nlohmann::json rope_scaling = nullptr;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  int64_t sliding_window = 0;     // written for mistral / qwen2 when > 0
  std::string dtype = "float32";  // float32 | float16 | bfloat16
};

// Named shapes: llama-125m, tinyllama-1.1b, llama2-7b-1layer.
CheckpointShape checkpoint_preset(const std::string& name);
int64_t parameter_count(const CheckpointShape& shape);

struct RandomCheckpointOptions {
  uint64_t seed = 0;
  double init_std = 0.02;
  double norm_noise = 0.0;      // norm weights are 1 + noise·N(0,1)
  int64_t max_shard_bytes = 0;  // > 0: sharded with model.safetensors.index.json
  std::string tokenizer_path;   // copied to tokenizer.model when set
};

// Throws kvc::Error naming the field (and its kvc-make-checkpoint flag) unless the shape is one the
// model loader accepts: positive sizes, heads a multiple of KV heads, an even head_dim, a known type.
void validate_checkpoint_shape(const CheckpointShape& shape);

// Validates everything first, then writes config.json, the weights and the tokenizer. On failure
// (a full disk) it removes what it wrote, and the folder too if it created it.
void write_random_checkpoint(const CheckpointShape& shape, const std::string& dir,
                             const RandomCheckpointOptions& options);

}  // namespace kvc
