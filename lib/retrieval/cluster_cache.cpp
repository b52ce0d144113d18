#include "retrieval/cluster_cache.h"

#include <vector>

namespace kvc::retrieval {

ClusterCache::ClusterCache(int64_t capacity_bytes, CachePolicy policy, int64_t record_bytes, double reserve_share,
                           int64_t recent_steps)
    : capacity_(capacity_bytes),
      record_bytes_(record_bytes),
      policy_(policy),
      reserve_share_(reserve_share),
      recent_steps_(recent_steps) {}

const EntryBlock* ClusterCache::get(int64_t uid) {
  counters_.lookups += 1;
  auto it = items_.find(uid);
  if (it == items_.end()) return nullptr;
  counters_.hits += 1;
  it->second.last_use = ++tick_;
  return &it->second.block;
}

void ClusterCache::put(int64_t uid, EntryBlock block, bool updated) {
  erase(uid);
  if (bytes_of(block) > capacity_) return;  // never cache what cannot fit
  Item item;
  item.block = std::move(block);
  item.last_use = ++tick_;
  if (updated) item.last_update = step_;
  used_ += bytes_of(item.block);
  items_.emplace(uid, std::move(item));
  make_room(uid);
}

void ClusterCache::append(int64_t uid, const float* key, const float* value, int64_t position) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  it->second.block.push(key, value, position);
  it->second.last_update = step_;
  used_ += record_bytes_;
  make_room(uid);
}

void ClusterCache::erase(int64_t uid) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  used_ -= bytes_of(it->second.block);
  items_.erase(it);
}

void ClusterCache::make_room(int64_t keep_uid) {
  while (used_ > capacity_) {
    int64_t recent_bytes = 0;
    for (const auto& [uid, item] : items_)
      if (step_ - item.last_update < recent_steps_) recent_bytes += bytes_of(item.block);
    // Recently updated clusters are protected while they fit in their reserved share.
    const bool protect_recent = policy_ == CachePolicy::kAligned && recent_bytes <= reserve_share_ * capacity_;
    int64_t victim = -1;
    const Item* best = nullptr;
    for (const auto& [uid, item] : items_) {
      if (uid == keep_uid) continue;
      if (protect_recent && step_ - item.last_update < recent_steps_) continue;
      bool better = best == nullptr;
      if (!better && policy_ == CachePolicy::kAligned) {
        const int64_t a = item.block.size(), b = best->block.size();
        better = a > b || (a == b && item.last_use < best->last_use);
      } else if (!better) {
        better = item.last_use < best->last_use;
      }
      if (better) best = &item, victim = uid;
    }
    if (victim < 0) {  // only protected or the kept one remain: fall back to plain LRU
      for (const auto& [uid, item] : items_)
        if (uid != keep_uid && (best == nullptr || item.last_use < best->last_use)) best = &item, victim = uid;
    }
    if (victim < 0) {  // the kept cluster alone overflows
      erase(keep_uid);
      return;
    }
    erase(victim);
    counters_.evictions += 1;
  }
}

}  // namespace kvc::retrieval
