#include "retrieval/prefetcher.h"

#include <chrono>

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
  pending_layer_ = layer;
  pending_uids_ = uids;
  pending_ =
      io_->submit([store = store_, uids = std::move(uids), gap = gap_pages_] { return store->read_pages(uids, gap); });
}

double Prefetcher::collect(int64_t layer) {
  ready_.clear();
  if (!pending_.valid()) return 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<PageStore::PageImage> images = pending_.get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters_.wait_seconds += waited;
  if (pending_layer_ == layer)
    for (size_t i = 0; i < images.size(); ++i) ready_.emplace(pending_uids_[i], std::move(images[i]));
  pending_layer_ = -1;
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
