#pragma once
// The index of a clustered cache (<name>.safetensors), written atomically after the store is
// committed, so it doubles as the store's commit record:
//   centroids F32 [U, d], variances F32 [U], clusters I64 [U, 4] (uid, layer, KV head, size),
//   entry_cluster I64 [M, 4] (layer, KV head, position, uid), extents I64 [U, 6] (uid, first page,
//   full pages, tail page, tail count, digest), thresholds F32 [layers, KV heads] (τ_h),
//   metadata: store path, generation, head_dim, page bytes, file pages, strategy.
#include <string>
#include <vector>

#include "retrieval/index_reader.h"
#include "retrieval/retrieval_layer_cache.h"

namespace kvc::retrieval {

// Commits the store and writes the index. Reads every cluster once (for the entry map). The index
// names its store as `store_as_recorded` (empty: the store's path as opened), so that a path relative
// to the index's folder can be recorded for a store opened by another path.
void write_index(const std::string& path, RetrievalShared& shared, const std::vector<RetrievalLayerCache*>& layers,
                 const std::string& model_dir, const std::string& store_as_recorded = "");

}  // namespace kvc::retrieval
