#pragma once
// --retrieval as a CacheSetup, so every tool and evaluation takes it like --press and --lowrank: each
// cache the run creates gets a clustered store of its own (sequences never share pages).
#include <string>

#include <nlohmann/json.hpp>

#include "model/cache_setup.h"
#include "retrieval/head_index.h"

namespace kvc::retrieval {

// `spec`: STRATEGY[:key=val,...] (see RetrievalConfig). `store_path`: the store file of the run's cache
// (kept after the run); empty: a temporary file per cache in $TMPDIR, removed with its cache.
CacheSetup make_retrieval_setup(const std::string& spec, const std::string& store_path, const LlamaModel& model);

// One line: what a cache read from and wrote to storage, and the time spent clustering and choosing.
std::string describe_storage_io(const RetrievalShared& shared);
// The same counters as JSON fields (kvc-generate --json: "cache_report").
nlohmann::json storage_io_json(const RetrievalShared& shared);

}  // namespace kvc::retrieval
