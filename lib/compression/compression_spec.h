#pragma once
// What a user asked for on the command line (--press, --ratio, --budget, --budgets, --lowrank, --rank,
// --retrieval), turned into a CacheSetup: the one place tools combine compression families.
#include <string>

#include "model/cache_setup.h"
#include "model/llama_model.h"

namespace kvc {

struct CompressionSpec {
  std::string press = "none";   // token eviction: NAME[:key=val,...]
  double ratio = 0.0;           // share of the prompt's cache to remove (0 = keep all)
  int64_t budget = 0;           // or: entries to keep per KV head (never both)
  std::string budgets_file;     // per-layer budgets from kvc-profile
  std::string lowrank_file;     // gates.safetensors (adaptive) or bases.safetensors (fixed rank)
  int64_t rank = 0;             // fixed rank with a bases file
  std::string retrieval;        // KV cache on storage, clustered: STRATEGY[:key=val,...]
  std::string retrieval_store;  // its store file (empty: temporary files)
  std::string cache_type;       // keys and values in f32|f16|bf16|q8_0|q4_0 (a sweep's typed row; empty: the model's)

  bool is_uncompressed() const {
    return (press == "none" || press.empty()) && lowrank_file.empty() && retrieval.empty() && cache_type.empty();
  }
  std::string describe() const;  // e.g. "snapkv:window=32 ratio=0.5"
};

// Flags that contradict each other or would do nothing (--press without a size, --budgets without
// --press, --ratio with --budget, --rank without --lowrank): one-line kvc::Error naming the flag to fix.
void check_flag_combination(const CompressionSpec& spec);

// Validates the spec against the model (one-line kvc::Error for unknown names, impossible budgets,
// artifacts made for another model) and builds the setup.
CacheSetup build_cache_setup(const CompressionSpec& spec, const LlamaModel& model);

}  // namespace kvc
