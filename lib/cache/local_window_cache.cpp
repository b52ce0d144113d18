#include "cache/local_window_cache.h"

#include "util/error.h"

namespace kvc {

LocalWindowCache::LocalWindowCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options)
    : DenseLayerCache(shape, std::move(rope), options), window_(shape.sliding_window) {
  KVC_CHECK(window_ > 0, "a local layer's cache needs a positive window");
}

void LocalWindowCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  // The new entries' queries see keys after (their position - window): the last `window` stored
  // entries cover that. Trimming in batches of `window` keeps it amortised O(1) per token.
  if (size() >= 2 * window_) {
    const int64_t n_kv = lengths().size(0);
    retain(at::arange(size() - window_, size(), at::TensorOptions().dtype(at::kLong))
               .unsqueeze(0)
               .expand({n_kv, window_}));
  }
  DenseLayerCache::append(keys, values, positions);
}

CacheFootprint LocalWindowCache::footprint() const {
  CacheFootprint f = DenseLayerCache::footprint();
  f.window_payload_bytes = f.payload_bytes;
  return f;
}

}  // namespace kvc
