#pragma once
// --retrieval as a CacheSetup, so every tool and evaluation takes it like --press and --lowrank: each
// cache the run creates gets a clustered store of its own (sequences never share pages).
#include <string>

#include <nlohmann/json.hpp>

#include "cache/cache_types.h"
#include "model/cache_setup.h"
#include "retrieval/head_index.h"

namespace kvc::retrieval {

// How the store keeps a model's entries: head_dim, and the key and value types of --cache-type-k/-v.
RecordFormat record_format(int64_t head_dim, const CacheTypes& types);

// The shared state for one model's cache: creates the store file at `store_path`, its records stored
// as `records` says.
std::shared_ptr<RetrievalShared> make_retrieval_shared(const RetrievalConfig& config, const RecordFormat& records,
                                                       const std::string& store_path, bool measure);

// `spec`: STRATEGY[:key=val,...] (see RetrievalConfig). `store_path`: the store file of the run's cache
// (kept after the run); empty: a temporary file per cache in $TMPDIR, removed with its cache.
CacheSetup make_retrieval_setup(const std::string& spec, const std::string& store_path, const LlamaModel& model);

// One line: what a cache read from and wrote to storage, and the time spent clustering and choosing.
std::string describe_storage_io(const RetrievalShared& shared);
// The same counters as JSON fields (kvc-generate --json: "cache_report").
nlohmann::json storage_io_json(const RetrievalShared& shared);
// centroids=storage: their peak in RAM, reads (ahead or waited for), wait and writes ("" / {"on": "ram"}
// when the centroids stay in RAM).
std::string describe_centroid_spill(const RetrievalShared& shared);
nlohmann::json centroid_spill_json(const RetrievalShared& shared);
// virtual=1: the per-layer caches' most bytes in RAM, clusters parked and read back, and the wait.
std::string describe_virtual_cache(const RetrievalShared& shared);
nlohmann::json virtual_cache_json(const RetrievalShared& shared);

}  // namespace kvc::retrieval
