#pragma once
// The two low-rank artifacts and their validation against a model:
//   bases.safetensors  (kvc-calibrate): per layer, PCA eigenvectors/eigenvalues of pre-RoPE K and V
//                      with all KV heads concatenated (d_kv = n_kv_heads * head_dim), sorted descending,
//                      and of the keys after RoPE (layers.L.k_rotated);
//   gates.safetensors  (kvc-train):     per layer, the trained basis U and rank gate W, b for K and V,
//                      and the rotated keys' basis passed on from the bases file.
// Both record the model's config hash; loading one made for another model, or with shapes that do not
// match, is a one-line kvc::Error naming the file.
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "core/model_config.h"

namespace kvc::lowrank {

inline constexpr const char* kBasesKind = "kvc-lowrank-bases";
inline constexpr const char* kGatesKind = "kvc-lowrank-gates";

// One projection (K or V) of one layer. x̃ = x U; gate logits = x̃ W + b (gates only).
struct Projection {
  at::Tensor U;            // [d_kv, d_kv] float32, columns = basis directions
  at::Tensor W, b;         // [d_kv, d_kv], [d_kv] float32; undefined in a bases file
  at::Tensor eigenvalues;  // [d_kv] float64, descending; bases only
  bool has_gate() const { return W.defined(); }
};

struct LayerBasis {
  Projection key, value;
  // PCA of the keys after RoPE at their positions (U and eigenvalues): the basis of --lowrank's
  // keys=rotated. Undefined in artifacts written before it existed.
  Projection rotated_key;
};

struct Artifact {
  std::string path;
  std::string kind;  // kBasesKind | kGatesKind
  std::vector<LayerBasis> layers;
  std::map<std::string, std::string> metadata;
  double tau = 0.1;  // gates: the hard-mask threshold recorded at training time
  bool is_gates() const { return kind == kGatesKind; }
  bool has_rotated_keys() const { return !layers.empty() && layers[0].rotated_key.U.defined(); }
};

// Reads and validates `path` ("-": standard input) against `config` (kind, config hash, layer count,
// shapes); errors name `flag`, the option the user gave the path with.
Artifact load_artifact(const std::string& path, const ModelConfig& config, const std::string& flag = "--lowrank");

// Writes atomically; `metadata` is added to what the artifact itself records (kind, model hash, shapes).
void write_artifact(const std::string& path, const Artifact& artifact, const ModelConfig& config);

}  // namespace kvc::lowrank
