#pragma once
// The cache of a local (sliding-window) layer: dense, masked to the window, and trimmed to its last
// `window` entries whenever it holds twice that many, so its memory stays bounded however long the
// context grows. Trimming happens right after attention: a long prompt's entries serve its own
// attention only, so they are dropped before the next layer runs rather than held to the next token
// (presses leave local layers alone; observers read the step's statistics, not these entries).
#include "cache/dense_layer_cache.h"

namespace kvc {

class LocalWindowCache : public DenseLayerCache {
 public:
  LocalWindowCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                   CacheTypes types = {});
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  CacheFootprint footprint() const override;
  std::unique_ptr<LayerCache> clone() const override;

 private:
  int64_t window_;
};

}  // namespace kvc
