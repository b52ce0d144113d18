#pragma once
// The clusters of one (layer, KV head) and the update strategies that keep them fit while decoding:
//  - adaptive: a new entry joins its nearest cluster j and updates (n_j, r_j, σ_j²) in O(d). If
//    σ_j² stays <= τ_h it is appended; else C_j is split by 2-means now when it is in RAM, or the
//    entry is buffered in RAM and C_j flagged, to be split the next time it is loaded (delayed
//    split, no extra read). Over B_max buffered entries the most-buffered cluster is loaded and split.
//  - static: append to the nearest cluster forever;
//  - local: new entries stay in RAM and are clustered on their own every N steps (ClusterKV/ShadowKV);
//  - pq: no clusters; product-quantised codes pick the entries (PQCache; RetrievalLayerCache);
//  - none: no clusters; the exact top entries are read (oracle selection), page by page.
// Plain C++ over PageStore + ClusterCache; the LayerCache turns the result into attention.
#include <cstdint>
#include <memory>
#include <vector>

#include "retrieval/cache_virtualizer.h"
#include "retrieval/centroid_spill.h"
#include "retrieval/centroid_table.h"
#include "retrieval/cluster_cache.h"
#include "retrieval/cluster_stats.h"
#include "retrieval/io_thread.h"
#include "retrieval/kmeans.h"
#include "retrieval/page_store.h"
#include "retrieval/prefetcher.h"
#include "retrieval/retrieval_config.h"

namespace kvc::retrieval {

// State shared by all layers of one cache: the store file, the RAM cache and the counters.
struct RetrievalShared {
  RetrievalConfig config;
  std::unique_ptr<PageStore> store;
  std::unique_ptr<ClusterCache> cache;
  std::unique_ptr<CentroidSpill> centroid_spill;  // centroids=storage; waits for its transfers when it goes
  std::unique_ptr<CacheVirtualizer> virtualizer;  // virtual=1; waits for its read when it goes
  std::unique_ptr<IoThread> io;                   // declared after the store: stops before the store closes
  std::unique_ptr<Prefetcher> prefetch;           // next-layer read-ahead (config.prefetch)
  int64_t num_layers = 0;                         // layers sharing this state, numbered as they were made
  int64_t step = 0;
  int64_t splits = 0, forced_splits = 0, delayed_splits = 0;
  int64_t split_moved_bytes = 0;                     // bytes of split children written to new places
  int64_t split_read_bytes = 0, split_read_ops = 0;  // reads made only to split an uncached cluster (in bytes_read too)
  double recall_sum = 0;
  int64_t recall_count = 0, retrieved_entries = 0;
  double compute_seconds = 0;
  double cluster_seconds = 0;  // prefill: clustering and ordering the prompt's entries
  double select_seconds = 0;   // decode: scoring the centroids and choosing clusters
  double update_seconds = 0;   // decode: placing each new entry (nearest centroid, splits, store append)
  double io_wait_seconds = 0;  // decode thread blocked on reads (with the I/O thread, what overlap left)
  bool measure = false;        // keep a full RAM copy to measure recall (kvc-cluster replay)
};

struct Cluster {
  int64_t uid = -1;
  ClusterStats stats;  // its centroid is row j of the head's CentroidTable
  EntryBlock delayed;  // adaptive: entries waiting for this cluster's split
};

// How a head's prompt entries are clustered and in which order the clusters go to storage. Computed
// without touching shared state, so the heads of a layer compute theirs in parallel.
struct PrefillPartition {
  KMeansResult clusters;
  std::vector<int64_t> order;
};

class HeadIndex {
 public:
  HeadIndex(RetrievalShared* shared, int64_t dim) : shared_(shared), dim_(dim), centroids_(dim), pending_(dim) {}

  // Clusters the prefill entries; `queries` [T, G, d] (rotated prompt queries of this head's group)
  // give the co-retrieval counts that order the clusters on storage. Thread-safe.
  static PrefillPartition partition(const RetrievalConfig& config, const EntryBlock& entries, const float* queries,
                                    int64_t T, int64_t G);
  // Writes the partition's clusters to the store in its order.
  void build(const EntryBlock& entries, const PrefillPartition& partition);
  bool built() const { return built_; }

  // Mean over the group's query heads of q·r_j; the top-k clusters (indices), best first.
  std::vector<int64_t> select(const float* queries, int64_t G) const;
  // Entries to attend for the selected clusters; reads misses from the store in one batch with
  // the other heads' requests (see RetrievalLayerCache). Also runs delayed splits.
  void add(const float* key, const float* value, int64_t position);
  // After the batch read: content of selected cluster i (from cache or store), splits flagged ones.
  EntryBlock take_loaded(int64_t index, EntryBlock loaded);

  const std::vector<Cluster>& clusters() const { return clusters_; }
  std::vector<Cluster>& clusters() { return clusters_; }
  const float* centroid(int64_t j) const;
  int64_t centroid_bytes() const { return centroids_.bytes(); }
  // centroids=storage moves the table out of RAM and back between the layer's steps.
  CentroidTable& centroid_table() { return centroids_; }
  const CentroidTable& centroid_table() const { return centroids_; }
  const EntryBlock& pending() const { return pending_; }
  double threshold() const { return tau_; }
  void set_threshold(double tau) { tau_ = tau; }
  int64_t buffered() const { return buffered_; }
  void set_active(std::vector<int64_t> active) { active_ = std::move(active); }
  double mean_variance() const;

 private:
  int64_t nearest(const float* key) const;
  void split(int64_t j, EntryBlock members);
  int64_t add_cluster(const EntryBlock& members, int64_t partner);
  EntryBlock load(int64_t j);  // for a forced split: cache or one store read
  void cluster_pending();

  RetrievalShared* shared_;
  int64_t dim_;
  std::vector<Cluster> clusters_;
  CentroidTable centroids_;
  mutable std::vector<float> scratch_;  // scores or distances of every centroid
  std::vector<int64_t> active_;
  EntryBlock pending_;  // local: new entries not yet clustered
  int64_t steps_since_local_ = 0;
  int64_t buffered_ = 0;
  double tau_ = 0;
  bool built_ = false;
};

}  // namespace kvc::retrieval
