#pragma once
// Per-KV-head variable lengths, stored CSR-style (FlashInfer): one flat [total, d] buffer of rotated
// keys, one of values, int64 positions [total], and indptr [n_kv + 1] giving each head's slice. Used
// when a method keeps a different number of entries per head (Ada-style budgets, unstructured
// KVCompose): memory shrinks to exactly the entries kept.
#include <memory>
#include <vector>

#include "cache/attention.h"
#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/rope.h"

namespace kvc {

class RaggedLayerCache : public LayerCache {
 public:
  RaggedLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                   CacheTypes types = {});

  // Builds from per-head rotated keys/values [len_h, d] (any floating type, or already stored) and
  // positions [len_h].
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
  bool supports_per_head_lengths() const override { return true; }
  std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head) override {
    retain_ragged(per_head);
    return nullptr;
  }
  at::Tensor entry_positions(int64_t head) const override { return head_positions(head); }

  const at::Tensor& indptr() const { return indptr_; }
  at::Tensor head_keys(int64_t h) const { return keys_.narrow(0, offset(h), length(h)); }
  at::Tensor head_values(int64_t h) const { return values_.narrow(0, offset(h), length(h)); }
  at::Tensor head_positions(int64_t h) const { return positions_.narrow(0, offset(h), length(h)); }

 private:
  int64_t offset(int64_t h) const { return offsets_[static_cast<size_t>(h)]; }
  int64_t length(int64_t h) const { return offsets_[static_cast<size_t>(h) + 1] - offsets_[static_cast<size_t>(h)]; }

  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  at::TensorOptions options_, key_options_, value_options_;  // key/value options: the storage dtype
  CacheTypes types_;                                         // resolved
  at::Tensor keys_, values_, positions_, indptr_;
  std::vector<int64_t> offsets_;  // host copy of indptr
};

}  // namespace kvc
