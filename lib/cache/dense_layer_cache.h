#pragma once
// The uncompressed layout: per KV head, rotated keys and values in contiguous [n_kv, capacity, d]
// buffers, all heads holding the same number of entries. Eviction methods that keep the same count
// per head shrink it in place with retain(); the buffers are reallocated so memory is really freed.
#include <memory>

#include "cache/attention.h"
#include "cache/layer_cache.h"
#include "core/rope.h"

namespace kvc {

class DenseLayerCache : public LayerCache {
 public:
  DenseLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;

  int64_t size() const { return length_; }
  // Views of the live entries: keys (rotated) and values [n_kv, size, d], positions [n_kv, size].
  at::Tensor keys() const { return keys_.narrow(1, 0, length_); }
  at::Tensor values() const { return values_.narrow(1, 0, length_); }
  at::Tensor positions() const { return positions_.narrow(1, 0, length_); }

  // Keeps, per KV head, the entries at `indices` [n_kv, n_keep] (storage order), into exactly-sized
  // buffers: the old ones are released.
  void retain(const at::Tensor& indices) override;
  // Evicts one entry per KV head in place: slots [n_kv] int64, one slot per head; the last entry moves
  // into the freed slot (positions travel with it), so nothing else is copied. What a bounded cache
  // does on every decode step.
  void evict_one(const at::Tensor& slots);
  // Replaces the whole content with exactly sized buffers: keys rotated, [n_kv, n, d]; positions [n_kv, n].
  void assign(const at::Tensor& rotated_keys, const at::Tensor& values, const at::Tensor& positions);
  void reserve(int64_t capacity);

 private:
  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  at::TensorOptions options_;
  at::Tensor keys_, values_, positions_;
  int64_t length_ = 0, capacity_ = 0;
};

class KVCache;
// Reserves room for `entries` per KV head in every dense layer of `cache` (other layouts are left
// alone): an uncompressed cache that will hold prompt + new tokens never grows while decoding.
void reserve_dense_layers(KVCache& cache, int64_t entries);

}  // namespace kvc
