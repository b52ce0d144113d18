#pragma once
// The cache of a local (sliding-window) layer: dense, masked to the window, and trimmed to its last
// `window` entries whenever it holds twice that many, so its memory stays bounded however long the
// context grows. Trimming happens before new entries are appended, so whoever inspects the cache
// after attention (eviction presses) still sees every entry of the current step.
#include "cache/dense_layer_cache.h"

namespace kvc {

class LocalWindowCache : public DenseLayerCache {
 public:
  LocalWindowCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options);
  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  CacheFootprint footprint() const override;

 private:
  int64_t window_;
};

}  // namespace kvc
