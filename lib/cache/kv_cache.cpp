#include "cache/kv_cache.h"

namespace kvc {

CacheFootprint KVCache::footprint() const {
  CacheFootprint total;
  for (const auto& layer : layers_) total += layer->footprint();
  return total;
}

}  // namespace kvc
