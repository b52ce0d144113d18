#pragma once
// The RAM cache of clusters read from storage, bounded in bytes, with two replacement policies:
//  - lru: evict the least recently used cluster;
//  - aligned (cluster-aligned): a share of the capacity is reserved for clusters updated in the
//    last few steps (they are about to be written and read again); among the others evict the
//    largest first (one large cluster frees room for several small ones, and small clusters are
//    the ones a query touches most often per byte), least recently used on ties.
// Appends to a resident cluster are written through, so a hit is always current.
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>

#include "retrieval/entry_block.h"

namespace kvc::retrieval {

enum class CachePolicy { kLru, kAligned };

struct CacheCounters {
  int64_t lookups = 0, hits = 0, evictions = 0;
};

class ClusterCache {
 public:
  ClusterCache(int64_t capacity_bytes, CachePolicy policy, int64_t record_bytes, double reserve_share = 0.25,
               int64_t recent_steps = 8);

  // The cached cluster or nullptr; counts a lookup.
  const EntryBlock* get(int64_t uid);
  bool resident(int64_t uid) const { return items_.count(uid) != 0; }
  void put(int64_t uid, EntryBlock block, bool updated);
  void append(int64_t uid, const float* key, const float* value, int64_t position);
  void erase(int64_t uid);
  void set_step(int64_t step) { step_ = step; }

  int64_t used_bytes() const { return used_; }
  int64_t capacity_bytes() const { return capacity_; }
  const CacheCounters& counters() const { return counters_; }

 private:
  struct Item {
    EntryBlock block;
    int64_t last_use = 0, last_update = -1000000;
  };
  int64_t bytes_of(const EntryBlock& b) const { return b.size() * record_bytes_; }
  void make_room(int64_t keep_uid);

  int64_t capacity_, record_bytes_;
  CachePolicy policy_;
  double reserve_share_;
  int64_t recent_steps_;
  int64_t used_ = 0, step_ = 0, tick_ = 0;
  std::unordered_map<int64_t, Item> items_;
  CacheCounters counters_;
};

}  // namespace kvc::retrieval
