#pragma once
// Next-layer prefetch: when layer l finishes its decode step, the clusters layer l+1 read at the
// previous step (its prediction for this step) are read on the I/O thread, so those reads overlap
// layer l's output projection and MLP and layer l+1's Q/K/V projections. Layer l+1 takes a
// prefetched cluster only if its pages are unchanged since the read (PageStore::complete); what it
// attends is then exactly what a demand read would have given. Prefetching changes reads and
// timing, never outputs: the RAM cache sees the same lookups and inserts either way.
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "retrieval/cluster_cache.h"
#include "retrieval/io_thread.h"
#include "retrieval/layer_page_read.h"
#include "retrieval/page_store.h"

namespace kvc::retrieval {

struct PrefetchCounters {
  int64_t issued = 0;       // clusters read ahead
  int64_t used = 0;         // ... taken by the layer they were read for (a demand read saved)
  int64_t stale = 0;        // ... needed but changed since (read again)
  double wait_seconds = 0;  // decode thread blocked on an unfinished prefetch
};

class Prefetcher {
 public:
  Prefetcher(PageStore* store, IoThread* io, int64_t gap_pages) : store_(store), io_(io), gap_pages_(gap_pages) {}

  // What `layer` read (or found cached) this step: its prediction for the next step.
  void record(int64_t layer, std::vector<int64_t> uids);
  // Reads ahead `layer`'s predicted clusters that are neither cached nor gone.
  void issue(int64_t layer, const ClusterCache& cache);
  // At the start of `layer`'s step: waits for a prefetch still in flight (counted in wait time);
  // keeps its clusters if they were read for `layer`, else drops them. Returns seconds waited.
  double collect(int64_t layer);
  // The current content of `uid` if it was prefetched for this layer and is unchanged.
  bool take(int64_t uid, EntryBlock* out);

  const PrefetchCounters& counters() const { return counters_; }

 private:
  PageStore* store_;
  IoThread* io_;
  int64_t gap_pages_;
  std::unordered_map<int64_t, std::vector<int64_t>> predicted_;  // layer -> uids
  std::vector<int64_t> pending_uids_;
  LayerPageRead pending_;
  std::unordered_map<int64_t, PageStore::PageImage> ready_;
  PrefetchCounters counters_;
};

}  // namespace kvc::retrieval
