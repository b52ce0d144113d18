#pragma once
// The uncompressed layout: per KV head, rotated keys and values in contiguous [n_kv, capacity, d]
// buffers, all heads holding the same number of entries. Eviction methods that keep the same count
// per head shrink it in place with retain(); the buffers are reallocated so memory is really freed.
#include <memory>

#include "cache/attention.h"
#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/rope.h"

namespace kvc {

class DenseLayerCache : public LayerCache, public PerHeadLayout, public MergeableRows {
 public:
  // `options`: device (and the dtype of keys and values not given in `types`).
  DenseLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                  CacheTypes types = {});

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;
  std::string layout() const override { return "dense"; }

  int64_t size() const { return length_; }
  // Views of the live entries as stored: keys (rotated) and values [n_kv, size, w] (w = d, or the
  // bytes of a row of blocks for q8_0/q4_0), positions [n_kv, size].
  at::Tensor keys() const { return keys_.narrow(1, 0, length_); }
  at::Tensor values() const { return values_.narrow(1, 0, length_); }
  at::Tensor positions() const { return positions_.narrow(1, 0, length_); }

  // Keeps, per KV head, the entries at `indices` [n_kv, n_keep] (storage order), into exactly-sized
  // buffers: the old ones are released.
  void retain(const at::Tensor& indices) override;
  // In place: the last entry of each head is copied into its freed slot (positions travel with it),
  // so nothing else moves.
  void evict_one(const at::Tensor& slots) override;
  // Replaces the whole content with exactly sized buffers: keys rotated, [n_kv, n, d] in any floating
  // type or already stored; positions [n_kv, n].
  void assign(const at::Tensor& rotated_keys, const at::Tensor& values, const at::Tensor& positions);
  void reserve(int64_t capacity) override;

  std::unique_ptr<LayerCache> clone() const override;

  // Heads keep different lengths by moving into the per-head (ragged) layout.
  PerHeadLayout* per_head_layout() override { return this; }
  std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head) override;
  at::Tensor entry_positions(int64_t head) const override { return positions()[head]; }
  // Merging rewrites rows in place, which a row of blocks sharing one scale cannot take.
  MergeableRows* mergeable_rows() override { return this; }
  bool can_merge() const override { return !types_.any_block_format(); }
  Rows merge_rows() override;

 protected:
  // After a member-wise copy: buffers of its own, so the copy and the original never write each other's.
  void own_buffers();

 private:
  // Writes the rows of an append straight into the buffers; false (nothing written) where that does
  // not apply (block formats, a GPU), and append then goes through LibTorch.
  bool write_rows(const at::Tensor& rotated_keys, const at::Tensor& values, const at::Tensor& positions);
  // Moves each head's last entry into slot[h] (where that is not the last) in CPU memory; shortens by one.
  void move_last_into(const int64_t* slot);
  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  at::TensorOptions options_, key_options_, value_options_;  // key/value options: the storage dtype
  CacheTypes types_;                                         // resolved
  at::Tensor keys_, values_, positions_;
  int64_t length_ = 0, capacity_ = 0;
};

}  // namespace kvc
