#pragma once
// DynaKV's Pipeline 2 (virtual=1): the RAM cluster cache is one per layer (cache_kb each), and only the
// layer being computed holds its clusters in RAM. When a layer's decode step ends its cached clusters
// are parked (dropped from RAM; their content is on storage, the cache being write-through) and the
// clusters the next layer had cached are read back on the I/O thread, overlapping this layer's output
// projection and MLP and the next layer's Q/K/V projections. RAM holds about two layers' caches while
// the cache behaves as one of L x cache_kb. A cluster read back is used only if its pages are unchanged
// since the read (PageStore::complete), so what a layer attends never changes; one that changed is
// dropped and read on demand if the layer picks it.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "retrieval/cluster_cache.h"
#include "retrieval/io_thread.h"
#include "retrieval/layer_page_read.h"
#include "retrieval/page_store.h"

namespace kvc::retrieval {

struct VirtualCacheCounters {
  int64_t parked = 0;                // clusters dropped from RAM at a layer's end
  int64_t restored = 0;              // ... put back before the layer's next step
  int64_t stale = 0;                 // ... read back but changed meanwhile (dropped)
  int64_t read_bytes = 0;            // records read back (in their RAM form, fp32)
  int64_t peak_in_flight_bytes = 0;  // most bytes of reads back in flight
  double wait_seconds = 0;           // decode thread blocked on a read back
};

class CacheVirtualizer {
 public:
  // `io`: null reads back inline.
  CacheVirtualizer(ClusterCache* cache, PageStore* store, IoThread* io, int64_t gap_pages)
      : cache_(cache), store_(store), io_(io), gap_pages_(gap_pages) {}

  // At the start of `layer`'s step: puts back what was read for it (waiting for the read if needed).
  void enter(int64_t layer);
  // At the end of `layer`'s step: parks its clusters and starts reading back `next`'s.
  void leave(int64_t layer, int64_t next);

  const VirtualCacheCounters& counters() const { return counters_; }

 private:
  ClusterCache* cache_;
  PageStore* store_;
  IoThread* io_;
  int64_t gap_pages_;
  std::unordered_map<int64_t, std::vector<ParkedCluster>> parked_;  // layer -> its clusters, off RAM
  std::vector<ParkedCluster> pending_clusters_;
  LayerPageRead pending_;
  VirtualCacheCounters counters_;
};

}  // namespace kvc::retrieval
