#include "cache/local_window_cache.h"

#include "util/error.h"

namespace kvc {

LocalWindowCache::LocalWindowCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                                   CacheTypes types)
    : DenseLayerCache(shape, std::move(rope), options, types), window_(shape.sliding_window) {
  KVC_CHECK(window_ > 0, "a local layer's cache needs a positive window");
}

at::Tensor LocalWindowCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                    const AttentionProbe& probe, AttentionStats* stats) {
  at::Tensor out = DenseLayerCache::attend(queries, q_positions, probe, stats);
  // Later queries see keys after (their position - window): the last `window` entries cover them.
  // Trimming only at twice the window keeps it amortised O(1) per token while decoding.
  if (size() >= 2 * window_) {
    const int64_t n_kv = lengths().size(0);
    retain(at::arange(size() - window_, size(), at::TensorOptions().dtype(at::kLong))
               .unsqueeze(0)
               .expand({n_kv, window_}));
  }
  return out;
}

std::unique_ptr<LayerCache> LocalWindowCache::clone() const {
  auto copy = std::make_unique<LocalWindowCache>(*this);
  copy->own_buffers();
  return copy;
}

CacheFootprint LocalWindowCache::footprint() const {
  CacheFootprint f = DenseLayerCache::footprint();
  f.window_payload_bytes = f.payload_bytes;
  return f;
}

}  // namespace kvc
