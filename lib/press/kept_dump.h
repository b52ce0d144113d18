#pragma once
// What a compression kept, for inspection and for parity checks against other implementations:
// per layer × KV head, the prompt positions kept after prefill, the positions held at the end, and
// for merging presses (D2O) which evicted position was merged into which kept one.
#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace kvc {

class KVCache;
class LayerCache;
class ForwardObserver;

struct KeptRecord {
  int64_t num_layers = 0, num_kv_heads = 0, prompt_tokens = 0;
  // [layer][head]: int64 positions, ascending, held right after the prompt was compressed.
  std::vector<std::vector<at::Tensor>> after_prefill;
  // [layer][head]: int64 rows (evicted position, position merged into), in the order merged.
  std::vector<std::vector<std::vector<std::pair<int64_t, int64_t>>>> merged;

  void reset(int64_t layers, int64_t kv_heads);
  // Adds merges of `layer`: rows (head, evicted slot, slot merged into) of `cache`, read before the
  // eviction reorders its storage.
  void add_merges(int64_t layer, const at::Tensor& rows, const LayerCache& cache);
  // Snapshot of the positions each layer of `cache` holds (any layout that exposes them per head).
  static std::vector<std::vector<at::Tensor>> positions_of(const KVCache& cache);
};

// An observer that can record what its compression keeps (ForwardObserver::kept_recorder).
class KeptRecorder {
 public:
  virtual ~KeptRecorder() = default;
  // Records from the next prompt on.
  virtual void record_kept() = 0;
  virtual const KeptRecord& kept_record() const = 0;
};

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
