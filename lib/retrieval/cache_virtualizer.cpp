#include "retrieval/cache_virtualizer.h"

#include <algorithm>

namespace kvc::retrieval {

void CacheVirtualizer::leave(int64_t layer, int64_t next) {
  std::vector<ParkedCluster> parked = cache_->park(layer);
  counters_.parked += static_cast<int64_t>(parked.size());
  parked_[layer] = std::move(parked);
  auto it = parked_.find(next);
  if (it == parked_.end() || pending_.in_flight()) return;
  // Read back what is still on storage (a split may have retired a cluster since).
  std::vector<ParkedCluster> wanted;
  std::vector<int64_t> uids;
  for (const ParkedCluster& p : it->second)
    if (store_->contains(p.uid)) wanted.push_back(p), uids.push_back(p.uid);
  parked_.erase(it);
  if (uids.empty()) return;
  pending_clusters_ = std::move(wanted);
  pending_.start(next, store_, io_, std::move(uids), gap_pages_);
}

void CacheVirtualizer::enter(int64_t layer) {
  if (!pending_.for_layer(layer)) return;
  std::vector<PageStore::PageImage> images = pending_.finish(&counters_.wait_seconds);
  int64_t bytes = 0;
  for (size_t i = 0; i < images.size(); ++i) {
    EntryBlock block(images[i].records.dim);
    if (!store_->complete(pending_clusters_[i].uid, images[i], &block)) {
      counters_.stale += 1;
      continue;
    }
    bytes += block.size() * RecordFormat{block.dim}.record_bytes();
    cache_->unpark(pending_clusters_[i], std::move(block));
    counters_.restored += 1;
  }
  counters_.read_bytes += bytes;
  counters_.peak_in_flight_bytes = std::max(counters_.peak_in_flight_bytes, bytes);
  pending_clusters_.clear();
}

}  // namespace kvc::retrieval
