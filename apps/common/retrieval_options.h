#pragma once
// --retrieval flags for kvc-generate: keep the KV cache on storage as clusters (lib/retrieval),
// with only sinks, a recent window, centroids and a bounded cluster cache in RAM.
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <memory>
#include <string>

#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "util/error.h"

namespace kvc::cli {

struct RetrievalOptions {
  std::string spec;   // empty: off
  std::string store;  // store file (default: a temporary file, removed at exit)
  std::shared_ptr<retrieval::RetrievalShared> shared;
  bool temporary = false;

  ~RetrievalOptions() {
    shared.reset();
    if (temporary) ::unlink(store.c_str());
  }

  void add_to(CLI::App& app) {
    app.add_option("--retrieval", spec,
                   "KV cache on storage, clustered: adaptive|static|local[:topk=4,cache_kb=64,...] (see kvc-cluster --help)");
    app.add_option("--retrieval-store", store, "Store file for --retrieval (default: a temporary file)");
  }
  bool enabled() const { return !spec.empty(); }

  LayerCacheFactory factory(const LlamaModel& model) {
    const auto config = retrieval::RetrievalConfig::parse(spec);
    KVC_CHECK(config.strategy != retrieval::Strategy::kNone,
              "--retrieval none needs every key in RAM to pick entries; use adaptive, static or local");
    if (store.empty()) {
      store = "/tmp/kvc-generate-" + std::to_string(::getpid()) + ".kvs";
      temporary = true;
    }
    const ModelConfig& c = model.config();
    shared = retrieval::make_retrieval_shared(config, c.head_dim, store, false);
    return retrieval::retrieval_layer_factory(c.attention_shape(),
                                              model.rope(), shared);
  }

  // One line for stderr: what the decode read from storage.
  std::string summary() const {
    if (!shared) return "";
    const auto& io = shared->store->counters();
    const auto& cc = shared->cache->counters();
    return fmt::format("retrieval {}: read {:.1f} KiB in {} ops ({:.3f} s, {}), wrote {:.1f} KiB, cache hit rate {:.3f}, "
                       "{} splits, store {:.1f} KiB",
                       shared->config.name(), io.read_bytes / 1024.0, io.read_ops, io.read_seconds,
                       shared->store->direct() ? "O_DIRECT" : "fadvise", io.written_bytes / 1024.0,
                       cc.lookups > 0 ? double(cc.hits) / cc.lookups : 0.0, shared->splits,
                       shared->store->file_pages() * 4.0);
  }
};

}  // namespace kvc::cli
