#pragma once
// --lowrank / --rank -> a layer-cache factory for the variable-rank cache.
//   --lowrank gates.safetensors            adaptive rank, τ as trained
//   --lowrank gates.safetensors:tau=0.3    adaptive rank at another threshold (larger τ: smaller cache)
//   --lowrank bases.safetensors --rank 8   fixed rank 8 for every token and layer (PCA truncation)
//   --lowrank bases.safetensors:ranks=4/8/8/12/16   fixed rank per layer
//   --lowrank bases.safetensors:share=0.3   fixed ranks per layer and K/V, searched for the most explained
//                                           variance in 30% of the cache (rank_search.h)
//   ...:keys=rotated                        keys stored after RoPE in a basis of rotated keys, so that a
//                                           decode step scores them without rebuilding them (any of the above)
//   gates.safetensors:gate=f16              the gate's matrix rounded to f16 (held in f16 on the CPU: half
//                                           the bytes a decode step reads for it; ranks near τ may move)
//   bases.safetensors:group=4 --rank 32     Palu's grouped decomposition (grouped_basis.h): each group of
//                                           4 KV heads its own basis from the calibration's second moment
//   palu[:group=4] --rank 32                the same from the model's K/V projection weights (their SVD),
//                                           no file; without group=, one group of every KV head (J-LRD)
#include <string>
#include <vector>

#include "cache/kv_cache.h"
#include "lowrank/lowrank_layer_cache.h"
#include "model/llama_model.h"

namespace kvc::lowrank {

struct LowRankSpec {
  std::string path;
  double tau = -1;             // < 0: the artifact's
  std::vector<int64_t> ranks;  // per layer (fixed rank), from ":ranks=" or --rank
  double share = 0;            // > 0: ranks searched for this kept share of the cache
  bool rotated_keys = false;   // ":keys=rotated": keys stored after RoPE in the rotated keys' basis
  bool half_gate = false;      // ":gate=f16": the gate's matrix rounded to f16
  int64_t group = 0;           // ":group=S": Palu's groups of S KV heads, each with its own basis (0: one basis)
  bool from_weights() const { return path == kPaluPath; }
  static constexpr const char* kPaluPath = "palu";  // the bases from the model's weights, not a file
};

// The layers a low-rank cache is built for: every layer but sliding-window ones (they keep their window).
std::vector<int64_t> lowrank_layers(const ModelConfig& config);

// Parses "FILE[:key=val,...]" together with --rank; kvc::Error on unknown keys or bad values.
LowRankSpec parse_lowrank_spec(const std::string& text, int64_t rank);

// Loads and validates the artifact and returns a factory of LowRankLayerCache for `model`.
LayoutFactory<LowRankLayerCache> make_lowrank_factory(const LowRankSpec& spec, const LlamaModel& model);

}  // namespace kvc::lowrank
