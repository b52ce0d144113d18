#pragma once
// The RAM cache of clusters read from storage, bounded in bytes, with two replacement policies:
//  - lru: evict the least recently used cluster;
//  - aligned (cluster-aligned): a share of the capacity is reserved for clusters updated in the
//    last few steps (they are about to be written and read again); among the others evict the
//    largest first (one large cluster frees room for several small ones, and small clusters are
//    the ones a query touches most often per byte), least recently used on ties.
// Appends to a resident cluster are written through, so a hit is always current. An eviction costs
// O(log n): the clusters are kept ordered by size and by last use, and the bytes of the recently
// updated ones are summed as they come and go (a model-wide cache holds thousands of clusters).
// Per layer (virtual=1, DynaKV's Pipeline 2): each layer gets the capacity, evictions stay within the
// layer, and a layer's clusters can be parked (dropped from RAM with their recency, their content being
// on storage) and put back when the layer computes again (cache_virtualizer.h).
#include <cstdint>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "retrieval/entry_block.h"

namespace kvc::retrieval {

enum class CachePolicy { kLru, kAligned };

struct CacheCounters {
  int64_t lookups = 0, hits = 0, evictions = 0;
  int64_t peak_bytes = 0;  // most bytes held at once
};

// A parked cluster: what the cache knew of it besides its content.
struct ParkedCluster {
  int64_t uid = 0, last_use = 0, last_update = 0;
};

class ClusterCache {
 public:
  ClusterCache(int64_t capacity_bytes, CachePolicy policy, int64_t record_bytes, double reserve_share = 0.25,
               int64_t recent_steps = 8, bool per_layer = false);

  // The cached cluster or nullptr; counts a lookup.
  const EntryBlock* get(int64_t uid);
  bool resident(int64_t uid) const { return items_.count(uid) != 0; }
  void put(int64_t uid, EntryBlock block, bool updated);
  void append(int64_t uid, const float* key, const float* value, int64_t position);
  void erase(int64_t uid);
  void set_step(int64_t step) { step_ = step; }
  // The layer whose step runs: its puts are its clusters (per layer: the capacity applies to them).
  void set_layer(int64_t layer) { layer_ = layer; }
  bool per_layer() const { return per_layer_; }
  // Per layer: drops `layer`'s clusters from RAM and returns them, most recently used first.
  std::vector<ParkedCluster> park(int64_t layer);
  // Puts a parked cluster back (for the current layer) as it was: no lookup counted, no eviction.
  void unpark(const ParkedCluster& parked, EntryBlock block);

  int64_t used_bytes() const { return used_; }
  int64_t capacity_bytes() const { return capacity_; }
  const CacheCounters& counters() const { return counters_; }

 private:
  struct Item {
    EntryBlock block;
    int64_t last_use = 0, last_update = -1000000;
    int64_t layer = 0;
  };
  // Orders among one layer's clusters (layer 0 for all when the cache is one per model): largest first,
  // then least recently used (aligned); least recently used (lru); least recently updated (to expire
  // the recently updated).
  using SizeKey = std::tuple<int64_t, int64_t, int64_t, int64_t>;  // layer, -size, last_use, uid
  using UseKey = std::tuple<int64_t, int64_t, int64_t>;            // layer, last_use, uid
  int64_t group(const Item& item) const { return per_layer_ ? item.layer : 0; }
  void index(int64_t uid, const Item& item);
  void unindex(int64_t uid, const Item& item);
  bool recent(const Item& item) const { return step_ - item.last_update < recent_steps_; }
  // Drops from the recent sum of `g` the clusters whose last update is no longer recent.
  void expire(int64_t g);
  void add_used(int64_t layer, int64_t bytes);
  int64_t bytes_of(const EntryBlock& b) const { return b.size() * record_bytes_; }
  void make_room(int64_t keep_uid);

  int64_t capacity_, record_bytes_;
  CachePolicy policy_;
  double reserve_share_;
  int64_t recent_steps_;
  bool per_layer_;
  int64_t used_ = 0, step_ = 0, tick_ = 0, layer_ = 0;
  std::unordered_map<int64_t, int64_t> layer_used_;  // per layer: bytes each layer holds
  std::unordered_map<int64_t, Item> items_;
  std::set<SizeKey> by_size_;
  std::set<UseKey> by_use_;
  std::unordered_map<int64_t, std::set<UseKey>> updated_;  // per group: (layer, last_update, uid) of the recent
  std::unordered_map<int64_t, int64_t> recent_bytes_;      // per group: bytes of the clusters in updated_
  CacheCounters counters_;
};

}  // namespace kvc::retrieval
