#pragma once
// What a compression kept, for inspection and for parity checks against other implementations:
// per layer × KV head, the prompt positions kept after prefill, the positions held at the end, and
// for merging presses (D2O) which evicted position was merged into which kept one.
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "cache/kept_record.h"

namespace kvc {

class KVCache;
class ForwardObserver;

// Writes FILE.safetensors: for every layer l and KV head h, "kept.{l}.{h}" int32 [n] (after prefill),
// "final.{l}.{h}" int32 [n] (held in `cache` at the end), and for merging presses "merged.{l}.{h}"
// int32 [m, 2] (evicted position, kept position it was merged into). `metadata` goes into the header
// next to prompt_tokens, num_layers and num_kv_heads.
void write_kept_dump(const std::string& path, const KeptRecord& record, const KVCache& cache,
                     const std::map<std::string, std::string>& metadata);

// --dump-kept PATH for the tools: start before the prompt is run (no-op for an empty path; an error
// when the observer is not a press's), write after generation.
void start_kept_dump(const std::string& path, ForwardObserver* observer);
void finish_kept_dump(const std::string& path, ForwardObserver* observer, const KVCache& cache,
                      const std::map<std::string, std::string>& metadata);

}  // namespace kvc
