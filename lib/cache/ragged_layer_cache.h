#pragma once
// Per-KV-head variable lengths, stored CSR-style (FlashInfer): one flat buffer of rotated keys, one of
// values and one of int64 positions, each head owning a region of it (start, length, capacity). Used
// when a method keeps a different number of entries per head (Ada-style budgets, unstructured
// KVCompose): compression shrinks memory to exactly the entries kept, and decoding appends into each
// head's spare rows, the regions growing geometrically, so an append is amortised O(1), not a copy of
// the whole cache.
#include <memory>
#include <vector>

#include "cache/attention.h"
#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/rope.h"

namespace kvc {

class RaggedLayerCache : public LayerCache, public PerHeadLayout {
 public:
  RaggedLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                   CacheTypes types = {});

  // Builds from per-head rotated keys/values [len_h, d] (any floating type, or already stored) and
  // positions [len_h], exactly sized.
  void assign(const std::vector<at::Tensor>& rotated_keys, const std::vector<at::Tensor>& values,
              const std::vector<at::Tensor>& positions);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  // Stats are per head in storage order, padded to the longest head: [n_heads, max_len] (zeros past
  // a head's length), window_probs [n_heads, window, max_len].
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  void retain(const at::Tensor& indices) override;
  // Keeps, for head h, the entries at per_head[h] (indices within that head's slice).
  void retain_ragged(const std::vector<at::Tensor>& per_head);
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;
  std::string layout() const override { return "ragged"; }
  PerHeadLayout* per_head_layout() override { return this; }
  std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head) override {
    retain_ragged(per_head);
    return nullptr;
  }
  // In place: each head's entries after its first erased one move up over the gaps (no reallocation), so
  // dropping the entries that just left a recent window moves only that window.
  std::unique_ptr<LayerCache> erase_per_head(const std::vector<at::Tensor>& erased) override;
  at::Tensor entry_positions(int64_t head) const override { return head_positions(head); }

  // [n_kv + 1] int64: head h holds the h-th slice of the heads' entries laid end to end.
  at::Tensor indptr() const;
  at::Tensor head_keys(int64_t h) const { return keys_.narrow(0, start(h), length(h)); }
  at::Tensor head_values(int64_t h) const { return values_.narrow(0, start(h), length(h)); }
  at::Tensor head_positions(int64_t h) const { return positions_.narrow(0, start(h), length(h)); }

 private:
  int64_t start(int64_t h) const { return start_[static_cast<size_t>(h)]; }
  int64_t length(int64_t h) const { return length_[static_cast<size_t>(h)]; }
  // Regions of `capacity` rows per head, the held rows copied over.
  void regrow(const std::vector<int64_t>& capacity);

  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  at::TensorOptions options_, key_options_, value_options_;  // key/value options: the storage dtype
  CacheTypes types_;                                         // resolved
  at::Tensor keys_, values_, positions_;                     // [Σ capacity, row width], [Σ capacity]
  std::vector<int64_t> start_, length_, capacity_;           // per head, in rows
};

}  // namespace kvc
