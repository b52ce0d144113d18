#pragma once
// One retrieval setting, parsed from "STRATEGY[:key=value,...]", e.g.
// "adaptive:topk=4,bmax=16,layout=dual,cache=aligned,cache_kb=64".
#include <cstdint>
#include <string>

#include "retrieval/cluster_cache.h"
#include "retrieval/page_store.h"

namespace kvc::retrieval {

enum class Strategy { kAdaptive, kStatic, kLocal, kPQ, kNone };

struct RetrievalConfig {
  Strategy strategy = Strategy::kAdaptive;
  std::string label;          // how reports name it (default: the spec text)
  int64_t topk = 4;           // clusters read per KV head and step
  int64_t cluster_size = 8;   // mean entries per cluster at prefill (k = n / cluster_size)
  int64_t sinks = 4;          // first entries, always in RAM
  int64_t recent = 16;        // last entries, always in RAM
  int64_t bmax = 16;          // adaptive: buffered entries per head before a forced split
  double tau_quantile = 1.0;  // adaptive: τ_h = this quantile of the prefill cluster variances
  double tau_scale = 1.0;     //           times this
  int64_t local_every = 64;   // local: re-cluster the new entries every N steps
  int64_t pq_subspaces = 2;   // pq: parts of the head dimension, each quantised on its own
  int64_t pq_bits = 6;        //     2^bits centroids per part (one byte per part and key)
  int64_t budget = 0;         // entries read per head: clusters in score order until reached (none: exact
                              // top entries; 0: topk clusters, none reads topk * cluster_size)
  Layout layout = Layout::kDualHead;
  int64_t pool_pages = 0;  // dual-head pool size in pages (0: 2 x largest cluster, at least 4)
  bool coorder = true;     // place co-retrieved clusters next to each other
  int64_t gap_pages = 0;   // merge reads at most this many pages apart
  CachePolicy cache_policy = CachePolicy::kAligned;
  int64_t cache_kb = 64;  // RAM cache of clusters, per model
  int64_t kmeans_iterations = 20;
  bool cosine = false;     // metric=cosine: k-means on the keys' directions (ClusterKV), else squared distance
  int64_t segment = 2048;  // prefill k-means runs on consecutive runs of this many entries (0: all)
  bool direct_io = true;
  bool async_io = true;   // reads on an I/O thread, overlapped with attention head by head
  bool prefetch = false;  // read the next layer's predicted clusters ahead (needs async_io)
  // centroids=storage (DynaKV Pipeline 1): each layer's centroids go to storage after its step and are
  // read back while the layer before it finishes, instead of staying in RAM.
  bool centroids_on_storage = false;
  // virtual=1 (DynaKV Pipeline 2): a RAM cluster cache of cache_kb per layer, only the computing layer's
  // in RAM; the next layer's is read back while this one finishes.
  bool virtual_cache = false;
  // Where a cluster written whole keeps its unfilled last page: RAM for clusters of one or two entries
  // within a page (those the scoring picks most, each a read of its own otherwise), storage, or RAM for
  // every cluster.
  TailPlacement tails = TailPlacement::kSmallInRam;

  static RetrievalConfig parse(const std::string& spec);
  std::string name() const;
};

const char* strategy_name(Strategy s);
// Strategies without clusters (pq, none): the entries go to storage as pages in position order and each
// step reads the pages of the entries it picks, entry by entry (none by the exact scores of keys it keeps
// in RAM, pq by the scores of their product-quantised codes).
inline bool picks_entries(Strategy s) { return s == Strategy::kPQ || s == Strategy::kNone; }

}  // namespace kvc::retrieval
