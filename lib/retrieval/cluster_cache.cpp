#include "retrieval/cluster_cache.h"

#include <algorithm>
#include <vector>

namespace kvc::retrieval {

ClusterCache::ClusterCache(int64_t capacity_bytes, CachePolicy policy, int64_t record_bytes, double reserve_share,
                           int64_t recent_steps, bool per_layer)
    : capacity_(capacity_bytes),
      record_bytes_(record_bytes),
      policy_(policy),
      reserve_share_(reserve_share),
      recent_steps_(recent_steps),
      per_layer_(per_layer) {}

void ClusterCache::add_used(int64_t layer, int64_t bytes) {
  used_ += bytes;
  layer_used_[layer] += bytes;
  counters_.peak_bytes = std::max(counters_.peak_bytes, used_);
}

void ClusterCache::index(int64_t uid, const Item& item) {
  const int64_t g = group(item);
  by_size_.emplace(g, -item.block.size(), item.last_use, uid);
  by_use_.emplace(g, item.last_use, uid);
  if (recent(item)) {
    updated_[g].emplace(g, item.last_update, uid);
    recent_bytes_[g] += bytes_of(item.block);
  }
}

void ClusterCache::unindex(int64_t uid, const Item& item) {
  const int64_t g = group(item);
  by_size_.erase({g, -item.block.size(), item.last_use, uid});
  by_use_.erase({g, item.last_use, uid});
  if (updated_[g].erase({g, item.last_update, uid}) != 0) recent_bytes_[g] -= bytes_of(item.block);
}

void ClusterCache::expire(int64_t g) {
  std::set<UseKey>& updated = updated_[g];
  while (!updated.empty() && step_ - std::get<1>(*updated.begin()) >= recent_steps_) {
    recent_bytes_[g] -= bytes_of(items_.at(std::get<2>(*updated.begin())).block);
    updated.erase(updated.begin());
  }
}

const EntryBlock* ClusterCache::get(int64_t uid) {
  counters_.lookups += 1;
  auto it = items_.find(uid);
  if (it == items_.end()) return nullptr;
  counters_.hits += 1;
  unindex(uid, it->second);
  it->second.last_use = ++tick_;
  index(uid, it->second);
  return &it->second.block;
}

void ClusterCache::put(int64_t uid, EntryBlock block, bool updated) {
  erase(uid);
  if (bytes_of(block) > capacity_) return;  // never cache what cannot fit
  Item item;
  item.block = std::move(block);
  item.last_use = ++tick_;
  if (updated) item.last_update = step_;
  item.layer = layer_;
  add_used(layer_, bytes_of(item.block));
  index(uid, item);
  items_.emplace(uid, std::move(item));
  make_room(uid);
}

std::vector<ParkedCluster> ClusterCache::park(int64_t layer) {
  std::vector<ParkedCluster> parked;
  for (const auto& [uid, item] : items_)
    if (item.layer == layer) parked.push_back({uid, item.last_use, item.last_update});
  std::sort(parked.begin(), parked.end(),
            [](const ParkedCluster& a, const ParkedCluster& b) { return a.last_use > b.last_use; });
  for (const ParkedCluster& p : parked) erase(p.uid);
  return parked;
}

void ClusterCache::unpark(const ParkedCluster& parked, EntryBlock block) {
  erase(parked.uid);
  Item item;
  item.block = std::move(block);
  item.last_use = parked.last_use;
  item.last_update = parked.last_update;
  item.layer = layer_;
  add_used(layer_, bytes_of(item.block));
  index(parked.uid, item);
  items_.emplace(parked.uid, std::move(item));
}

void ClusterCache::append(int64_t uid, const float* key, const float* value, int64_t position) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  unindex(uid, it->second);
  it->second.block.push(key, value, position);
  it->second.last_update = step_;
  index(uid, it->second);
  add_used(it->second.layer, record_bytes_);
  make_room(uid);
}

void ClusterCache::erase(int64_t uid) {
  auto it = items_.find(uid);
  if (it == items_.end()) return;
  unindex(uid, it->second);
  used_ -= bytes_of(it->second.block);
  layer_used_[it->second.layer] -= bytes_of(it->second.block);
  items_.erase(it);
}

void ClusterCache::make_room(int64_t keep_uid) {
  // Per layer, the kept cluster's layer is over its capacity or not, and only its clusters are candidates.
  const auto kept = items_.find(keep_uid);
  const int64_t layer = kept != items_.end() ? kept->second.layer : layer_;
  const int64_t g = per_layer_ ? layer : 0;
  const auto over = [&] { return per_layer_ ? layer_used_[layer] > capacity_ : used_ > capacity_; };
  while (over()) {
    expire(g);
    // Recently updated clusters are protected while they fit in their reserved share.
    const bool protect_recent = policy_ == CachePolicy::kAligned && recent_bytes_[g] <= reserve_share_ * capacity_;
    int64_t victim = -1;
    if (policy_ == CachePolicy::kAligned) {
      // Largest first, least recently used on ties.
      for (auto it = by_size_.lower_bound({g, INT64_MIN, INT64_MIN, INT64_MIN});
           it != by_size_.end() && std::get<0>(*it) == g; ++it) {
        const int64_t uid = std::get<3>(*it);
        if (uid == keep_uid || (protect_recent && recent(items_.at(uid)))) continue;
        victim = uid;
        break;
      }
    }
    if (victim < 0) {  // lru, or only protected or the kept one remain: plain LRU
      for (auto it = by_use_.lower_bound({g, INT64_MIN, INT64_MIN}); it != by_use_.end() && std::get<0>(*it) == g; ++it)
        if (std::get<2>(*it) != keep_uid) {
          victim = std::get<2>(*it);
          break;
        }
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
