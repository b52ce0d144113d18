#pragma once
// The whole model's cache: one LayerCache per layer, plus the position the next token will take.
#include <functional>
#include <memory>
#include <vector>

#include "cache/layer_cache.h"

namespace kvc {

class KVCache {
 public:
  explicit KVCache(std::vector<std::unique_ptr<LayerCache>> layers) : layers_(std::move(layers)) {}

  int64_t num_layers() const { return static_cast<int64_t>(layers_.size()); }
  LayerCache& layer(int64_t i) { return *layers_.at(static_cast<size_t>(i)); }
  const LayerCache& layer(int64_t i) const { return *layers_.at(static_cast<size_t>(i)); }
  // Swaps in another storage scheme for a layer (e.g. after compressing it into a new layout).
  void replace_layer(int64_t i, std::unique_ptr<LayerCache> layer) {
    layers_.at(static_cast<size_t>(i)) = std::move(layer);
  }
  // PerHeadLayout::retain_per_head on layer i, swapping in the per-head layout when the layer moves to one.
  void retain_per_head(int64_t i, const std::vector<at::Tensor>& per_head);
  // Room for `entries` per KV head in every layer that can reserve: an uncompressed cache that will hold
  // prompt + new tokens never grows while decoding.
  void reserve(int64_t entries);

  // Token positions are logical: eviction never changes where the next token sits.
  int64_t next_position() const { return next_position_; }
  void advance(int64_t tokens) { next_position_ += tokens; }

  CacheFootprint footprint() const;
  int64_t resident_bytes() const;  // footprint().resident_bytes, with no read from a device

  // A deep copy of every layer (LayerCache::clone) with the next token at `next_position`: a shared
  // prefill replays compression on a copy of the filled cache as if the prompt were still being fed (0).
  KVCache replica(int64_t next_position) const;

 private:
  std::vector<std::unique_ptr<LayerCache>> layers_;
  int64_t next_position_ = 0;
};

using LayerCacheFactory = std::function<std::unique_ptr<LayerCache>(int64_t layer)>;
// A factory of one layout, for tools that reach that layout's own state (ranks, cluster indexes).
template <class Layer>
using LayoutFactory = std::function<std::unique_ptr<Layer>(int64_t layer)>;

// `make`, also listing each layer it makes in `made` (owned by the cache; valid while the cache lives).
template <class Layer>
LayerCacheFactory recording_layers(LayoutFactory<Layer> make, std::vector<Layer*>* made) {
  return [make = std::move(make), made](int64_t layer) -> std::unique_ptr<LayerCache> {
    std::unique_ptr<Layer> cache = make(layer);
    made->push_back(cache.get());
    return cache;
  };
}

}  // namespace kvc
