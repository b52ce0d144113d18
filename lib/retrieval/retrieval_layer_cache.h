#pragma once
// The KV cache of one layer kept on storage as clusters (see head_index.h, page_store.h): only the
// sink tokens, a recent window, the clusters' summaries and the strategies' RAM buffers stay in
// memory. Prefill (T > 1) attends exactly over the prompt, then clusters it; a decode step (T = 1)
// scores the query against the centroids, reads the top-k clusters (through the RAM cache) and runs
// exact attention over sinks + recent + retrieved entries only. With the model on a GPU the entries
// still live on the host; only that attention runs on the GPU.
#include <memory>
#include <string>
#include <vector>

#include "cache/attention.h"
#include "cache/kv_cache.h"
#include "core/rope.h"
#include "retrieval/head_index.h"
#include "retrieval/product_quantizer.h"

namespace kvc::retrieval {

class RetrievalLayerCache : public LayerCache {
 public:
  RetrievalLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, std::shared_ptr<RetrievalShared> shared);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  void retain(const at::Tensor& indices) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;
  std::string layout() const override { return "retrieval"; }

  // centroids=storage: this layer's centroid tables back in RAM (waiting for their read); a no-op when
  // they are resident. Decode steps call it themselves; a reader of heads()' centroids calls it first.
  void bring_centroids_back();

  const std::vector<HeadIndex>& heads() const { return heads_; }
  std::vector<HeadIndex>& heads() { return heads_; }
  // pq: KV head h's codebooks (untrained before the prompt's attention).
  const ProductQuantizer& head_quantizer(int64_t h) const { return state_[static_cast<size_t>(h)].pq; }

 private:
  struct HeadState {
    EntryBlock all, staging, sinks, recent;
    std::vector<int64_t> chunk_uids;  // none, pq: the store's pages in position order
    int64_t chunked = 0;              // none, pq: entries already written as pages
    EntryBlock unwritten;             // pq: entries after the last whole page (in RAM)
    ProductQuantizer pq;              // pq: this head's codebooks, trained on the prompt's keys
    std::vector<uint8_t> codes;       // pq: [chunked, subspaces] the written keys' codes
  };
  // This layer's entries appended since its last attend(): rotated keys, values, positions.
  struct NewEntries {
    at::Tensor keys, values, positions;
  };
  // Stores the waiting entries on the host; given the queries, brings them down in the same copy and
  // returns them there in float32.
  at::Tensor store_waiting(const at::Tensor& queries);
  // keys, values [kv_heads, T, d] float32 and positions [T] on the host.
  void store_entries(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions);
  // qf: the queries on the host in float32.
  at::Tensor attend_exact(const at::Tensor& queries, const at::Tensor& qf, const at::Tensor& q_positions);
  EntryBlock all_entries(int64_t h);
  void write_chunks(int64_t h);
  // Exact attention of each head's query group over its own entries (subsets[h] for KV head h).
  at::Tensor attend_subsets(const at::Tensor& queries, const at::Tensor& q_positions,
                            const std::vector<EntryBlock>& subsets) const;
  // centroids=storage: the tables go to storage and the next layer's are read ahead.
  void send_centroids_out();
  // A step of this layer begins / ends: its centroids (centroids=storage) and its cached clusters
  // (virtual=1) come back into RAM / go out, and the next layer's are read ahead.
  void enter_step();
  void end_step();
  // Share of the exact attention (all entries) of query heads q [G, d] that falls on `positions`.
  void measure_recall(int64_t h, const at::Tensor& q, const at::Tensor& q_position,
                      const std::vector<int64_t>& positions);

  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  std::shared_ptr<RetrievalShared> shared_;
  // This layer's place among the layers sharing the store, in the order they were made: a model whose
  // other layers keep a sliding window (Gemma 3) gives retrieval only some layer numbers, and the
  // step count, the shared RAM cache and the next layer to prefetch follow these places.
  int64_t slot_;
  int64_t length_ = 0;
  NewEntries waiting_;
  std::vector<HeadIndex> heads_;
  std::vector<HeadState> state_;
  bool centroids_out_ = false;        // centroids=storage: the tables are on storage, not in RAM
  int64_t centroid_bytes_noted_ = 0;  // what the spill was told this layer holds in RAM
};

LayoutFactory<RetrievalLayerCache> retrieval_layer_factory(const AttentionShape& shape,
                                                           std::shared_ptr<const Rope> rope,
                                                           std::shared_ptr<RetrievalShared> shared);

}  // namespace kvc::retrieval
