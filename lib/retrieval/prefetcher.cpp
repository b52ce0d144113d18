#include "retrieval/prefetcher.h"

namespace kvc::retrieval {

void Prefetcher::record(int64_t layer, std::vector<int64_t> uids) { predicted_[layer] = std::move(uids); }

void Prefetcher::issue(int64_t layer, const ClusterCache& cache) {
  auto it = predicted_.find(layer);
  if (it == predicted_.end()) return;
  std::vector<int64_t> uids;
  for (int64_t uid : it->second)
    if (!cache.resident(uid) && store_->contains(uid)) uids.push_back(uid);
  if (uids.empty()) return;
  counters_.issued += static_cast<int64_t>(uids.size());
  pending_uids_ = uids;
  pending_.start(layer, store_, io_, std::move(uids), gap_pages_);
}

double Prefetcher::collect(int64_t layer) {
  ready_.clear();
  if (!pending_.in_flight()) return 0;
  const bool for_this_layer = pending_.for_layer(layer);
  double waited = 0;
  std::vector<PageStore::PageImage> images = pending_.finish(&waited);
  counters_.wait_seconds += waited;
  if (for_this_layer)
    for (size_t i = 0; i < images.size(); ++i) ready_.emplace(pending_uids_[i], std::move(images[i]));
  pending_uids_.clear();
  return waited;
}

bool Prefetcher::take(int64_t uid, EntryBlock* out) {
  auto it = ready_.find(uid);
  if (it == ready_.end()) return false;
  const bool current = store_->complete(uid, it->second, out);
  ready_.erase(it);
  (current ? counters_.used : counters_.stale) += 1;
  return current;
}

}  // namespace kvc::retrieval
