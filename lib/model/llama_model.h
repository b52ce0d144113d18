#pragma once
// A Llama-family decoder (Llama, Mistral, Qwen2, Gemma 3 via the architecture table) over LibTorch.
// Weights keep their stored precision (fp32, bf16, f16); on the CPU a GGUF's block-quantized matrices
// stay in their blocks, read in place from the file's mapping (model/linear_weight.h), unless --dtype
// asks for them dequantized. On CPU activations are fp32 whatever the weights; on CUDA everything runs
// in the weights' dtype (a GGUF's blocks dequantized to bf16 at load).
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "cache/cache_types.h"
#include "cache/kv_cache.h"
#include "core/model_config.h"
#include "core/rope.h"
#include "model/forward_observer.h"
#include "model/linear_weight.h"

namespace kvc {

struct LayerWeights {
  at::Tensor attn_norm, qkv_bias;
  LinearWeight qkv, o_proj;  // qkv: q, k, v projections stacked [q+2kv, hidden]
  at::Tensor mlp_norm;
  LinearWeight gate_up, down;  // gate_up: gate and up stacked [2I, hidden]
  // Gemma 3 only (undefined otherwise): per-head query/key norms, norms after attention and after the MLP.
  at::Tensor q_norm, k_norm, post_attn_norm, post_mlp_norm;
};

struct LoadOptions {
  std::string device = "cpu";  // cpu | cuda
  // The weights' precision: auto (as stored: a GGUF's quantized blocks stay in their blocks on the CPU,
  // become bf16 on CUDA) | float32 | float64 | float16 | bfloat16 (GGUF blocks dequantized at load).
  std::string dtype = "auto";
  // What every cache made by new_cache() stores keys and values in (Undefined: f16 for a model whose
  // weights stay in GGUF blocks, as llama.cpp's default; else the activations' dtype).
  CacheTypes cache_types;
};

class LlamaModel {
 public:
  // Loads config.json and (sharded) safetensors from `dir`, or a .gguf file (dequantized at load);
  // validates every tensor's shape.
  static std::shared_ptr<LlamaModel> load(const std::string& dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const std::string& dir() const { return dir_; }
  at::Device device() const { return device_; }
  at::ScalarType dtype() const { return dtype_; }                // activations and cache
  at::ScalarType weight_dtype() const { return weight_dtype_; }  // the dense matrices as held in memory
  // How the matrices are held: the dtype's name, or "gguf blocks (Q4_K, Q6_K, ...)" with the formats.
  std::string weight_format() const;
  bool has_block_weights() const { return !block_formats_.empty(); }
  CacheTypes cache_types() const { return cache_types_; }  // resolved: never Undefined
  // The global layers' RoPE: the one every compressed cache uses (local layers keep dense caches).
  std::shared_ptr<const Rope> rope() const { return rope_; }
  std::shared_ptr<const Rope> rope_for_layer(int64_t layer) const;
  int64_t parameter_count() const;
  int64_t weight_bytes() const;  // bytes one decode step must read
  // The bytes a decode step streams (not the embedding), as tensors: dense matrices and norms, and
  // uint8 views of the GGUF blocks.
  std::vector<at::Tensor> decode_weights() const;

  // The uncompressed cache.
  KVCache new_cache() const;
  LayerCacheFactory dense_layer_factory() const;
  KVCache new_cache(const LayerCacheFactory& factory) const;
  // The dense cache in the activations' dtype whatever cache_types() says: what typed caches are
  // measured against.
  KVCache full_precision_cache() const;
  // The dense cache in `types` (resolved; check_cache_types_fit passed), whatever cache_types() says.
  KVCache typed_cache(CacheTypes types) const;

  // A layer's weights as loaded (read by methods that derive a cache from them, e.g. Palu's bases).
  const LayerWeights& layer_weights(int64_t layer) const { return layers_.at(static_cast<size_t>(layer)); }

  // Runs `tokens` at the positions after those already in `cache`, appending their entries.
  // Returns float32 logits [T, vocab] (or [1, vocab] when options.all_logits is false).
  at::Tensor forward(const std::vector<int>& tokens, KVCache& cache, const ForwardOptions& options = {}) const;
  // One decode step of B sequences in lockstep: sequence b feeds tokens[b] into *caches[b] under options[b]
  // (its observer; on_layer and all_logits are not used). Returns float32 logits [B, vocab], row b equal bit
  // for bit to forward({tokens[b]}, *caches[b], options[b]) (llama_lockstep.cpp): the same kernels and order
  // of sums for each row, but every weight matrix streams once for all B rows, so a step of B sequences
  // costs much less than B steps where decoding is bound by reading the weights.
  at::Tensor forward_lockstep(const std::vector<int>& tokens, const std::vector<KVCache*>& caches,
                              const std::vector<ForwardOptions>& options) const;

 private:
  LlamaModel() = default;
  at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight) const;
  // `prompt_tokens` > 0: x holds the prompt followed by tokens that only score it (see
  // ForwardObserver::scoring_tokens); they never enter the layer's cache.
  at::Tensor attention_block(int64_t layer, const at::Tensor& x, const at::Tensor& positions, KVCache& cache,
                             const ForwardOptions& options, int64_t prompt_tokens) const;
  // The layer's attention for tokens whose projections are `qkv` [T, q+2kv]: the heads' outputs [T, q_dim]
  // before W_o; `step` receives what the observer is handed.
  at::Tensor attend_layer(int64_t layer, const at::Tensor& qkv, const at::Tensor& positions, KVCache& cache,
                          const ForwardOptions& options, int64_t prompt_tokens, LayerStep& step) const;
  // lockstep: x holds one token of each of several sequences (LinearWeight::apply_each).
  at::Tensor mlp_block(int64_t layer, const at::Tensor& x, bool lockstep = false) const;
  LayerCacheFactory dense_layer_factory(CacheTypes types) const;
  KVCache new_cache(const LayerCacheFactory& factory, CacheTypes local_types) const;

  ModelConfig config_;
  std::string dir_;
  at::Device device_ = at::kCPU;
  at::ScalarType dtype_ = at::kFloat;
  at::ScalarType weight_dtype_ = at::kFloat;
  CacheTypes cache_types_{at::kFloat, at::kFloat};
  std::shared_ptr<const Rope> rope_;
  std::shared_ptr<const Rope> rope_local_;  // local (sliding-window) layers' RoPE; null without them
  LinearWeight embed_, lm_head_;
  at::Tensor final_norm_;
  std::vector<std::string> block_formats_;  // the GGUF block formats the matrices are held in
  double embedding_scale_ = 1.0;  // traits.scaled_embeddings: sqrt(hidden_size) as the activations' dtype rounds it
  std::vector<LayerWeights> layers_;
};

}  // namespace kvc
