#pragma once
// What a compression kept, per layer × KV head: the prompt positions held right after prefill and,
// for merging methods (D2O), which evicted position went into which kept one. Recorded by the
// observer that compresses (KeptRecorder), read by --dump-kept and by the parity checks.
#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace kvc {

class KVCache;
class LayerCache;

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

}  // namespace kvc
