#include "cache/kv_cache.h"

namespace kvc {

void KVCache::retain_per_head(int64_t i, const std::vector<at::Tensor>& per_head) {
  PerHeadLayout& layout = require_per_head_layout(layer(i), "keep a different number of entries per KV head");
  if (auto replacement = layout.retain_per_head(per_head)) replace_layer(i, std::move(replacement));
}

void KVCache::reserve(int64_t entries) {
  for (auto& layer : layers_) layer->reserve(entries);
}

KVCache KVCache::replica(int64_t next_position) const {
  std::vector<std::unique_ptr<LayerCache>> copies;
  copies.reserve(layers_.size());
  for (const auto& layer : layers_) copies.push_back(layer->clone());
  KVCache copy(std::move(copies));
  copy.next_position_ = next_position;
  return copy;
}

CacheFootprint KVCache::footprint() const {
  CacheFootprint total;
  for (const auto& layer : layers_) total += layer->footprint();
  return total;
}

int64_t KVCache::resident_bytes() const {
  int64_t total = 0;
  for (const auto& layer : layers_) total += layer->resident_bytes();
  return total;
}

}  // namespace kvc
