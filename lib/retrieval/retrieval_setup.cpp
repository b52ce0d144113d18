#include "retrieval/retrieval_setup.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <memory>

#include "retrieval/cluster_cache.h"
#include "retrieval/io_thread.h"
#include "retrieval/page_store.h"
#include "retrieval/prefetcher.h"
#include "retrieval/retrieval_layer_cache.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

// A store with its file. A temporary store is never published, so its file goes with the last layer
// of its cache; a --retrieval-store is published at its path when the run ends without an error.
struct OwnedStore {
  std::shared_ptr<RetrievalShared> shared;
  bool publish = false;
  ~OwnedStore() {
    if (publish && std::uncaught_exceptions() == 0) {
      try {
        shared->store->publish();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "warning: %s\n", e.what());  // a destructor cannot throw
      }
    }
    shared.reset();
  }
};

struct RetrievalRun {
  RetrievalConfig config;
  std::string store_path;
  int64_t caches = 0;
  std::shared_ptr<RetrievalShared> latest;
};

std::string temporary_store_path(int64_t index) {
  return (std::filesystem::temp_directory_path() / fmt::format("kvc-retrieval-{}-{}.kvs", ::getpid(), index)).string();
}

}  // namespace

RecordFormat record_format(int64_t head_dim, const CacheTypes& types) {
  const auto type = [](at::ScalarType t) {
    if (t == at::kFloat) return RecordType::kF32;
    if (t == at::kHalf) return RecordType::kF16;
    if (t == at::kBFloat16) return RecordType::kBF16;
    if (t == kCacheQ8_0) return RecordType::kQ8_0;
    KVC_CHECK(t == kCacheQ4_0, "--retrieval: the store cannot keep records in {}", cache_type_name(t));
    return RecordType::kQ4_0;
  };
  return {head_dim, type(types.keys), type(types.values)};
}

std::shared_ptr<RetrievalShared> make_retrieval_shared(const RetrievalConfig& config, const RecordFormat& records,
                                                       const std::string& store_path, bool measure) {
  auto shared = std::make_shared<RetrievalShared>();
  shared->config = config;
  // Without clusters the entries are pages in position order: the naive, append-only layout.
  const Layout layout = picks_entries(config.strategy) ? Layout::kNaive : config.layout;
  shared->store = std::make_unique<PageStore>(store_path, records, layout, config.direct_io);
  shared->store->set_tail_placement(config.tails);
  // The RAM cache holds clusters widened to fp32, whatever the records' type on storage.
  shared->cache =
      std::make_unique<ClusterCache>(config.cache_kb * 1024, config.cache_policy,
                                     RecordFormat{records.dim}.record_bytes(), 0.25, 8, config.virtual_cache);
  shared->measure = measure;
  if (config.async_io) shared->io = std::make_unique<IoThread>();
  if (config.virtual_cache)
    shared->virtualizer = std::make_unique<CacheVirtualizer>(shared->cache.get(), shared->store.get(), shared->io.get(),
                                                             config.gap_pages);
  if (config.centroids_on_storage)
    shared->centroid_spill = std::make_unique<CentroidSpill>(store_path, shared->io.get(), config.direct_io);
  if (config.prefetch)
    shared->prefetch = std::make_unique<Prefetcher>(shared->store.get(), shared->io.get(), config.gap_pages);
  return shared;
}

CacheSetup make_retrieval_setup(const std::string& spec, const std::string& store_path, const LlamaModel& model) {
  auto run = std::make_shared<RetrievalRun>();
  run->config = RetrievalConfig::parse(spec);
  run->store_path = store_path;
  KVC_CHECK(run->config.strategy != Strategy::kNone,
            "--retrieval none needs every key in RAM to pick entries; use adaptive, static, local or pq");
  KVC_CHECK(run->config.strategy != Strategy::kPQ || model.config().head_dim % run->config.pq_subspaces == 0,
            "--retrieval {}: subspaces={} does not divide the model's head_dim {}", spec, run->config.pq_subspaces,
            model.config().head_dim);
  const AttentionShape shape = model.config().attention_shape();
  const std::shared_ptr<const Rope> rope = model.rope();
  CacheSetup setup;
  setup.name = "retrieval " + run->config.name();
  setup.bounded = true;
  setup.selects_per_token = true;
  const CacheTypes types = model.cache_types();
  setup.layout = [run, shape, rope, types]() {
    const bool temporary = run->store_path.empty();
    KVC_CHECK(temporary || run->caches == 0,
              "--retrieval-store {} holds one cache; this run makes several: leave --retrieval-store out",
              run->store_path);
    const std::string path = temporary ? temporary_store_path(run->caches) : run->store_path;
    ++run->caches;
    auto owned = std::make_shared<OwnedStore>();
    owned->shared = make_retrieval_shared(run->config, record_format(shape.head_dim, types), path, false);
    owned->publish = !temporary;
    // The layers hold the store through `owned`, so the file goes when the cache does.
    std::shared_ptr<RetrievalShared> shared(owned, owned->shared.get());
    run->latest = shared;
    return retrieval_layer_factory(shape, rope, shared);
  };
  setup.report = [run]() { return run->latest ? describe_storage_io(*run->latest) : std::string(); };
  setup.report_json = [run]() { return run->latest ? storage_io_json(*run->latest) : nlohmann::json(); };
  return setup;
}

std::string describe_storage_io(const RetrievalShared& shared) {
  const auto& io = shared.store->counters();
  const auto& cc = shared.cache->counters();
  const double steps = static_cast<double>(std::max<int64_t>(1, shared.step));
  return fmt::format(
             "retrieval {}: read {:.1f} KiB in {} ops ({:.3f} s, {}), wrote {:.1f} KiB, cache hit rate {:.3f}, "
             "{} splits, store {:.1f} KiB; prompt clustered in {:.3f} s; per decode step {:.3f} ms choosing "
             "clusters, {:.3f} ms placing new entries",
             shared.config.name(), io.read_bytes / 1024.0, io.read_ops, io.read_seconds,
             shared.store->direct() ? "O_DIRECT" : "fadvise", io.written_bytes / 1024.0,
             cc.lookups > 0 ? static_cast<double>(cc.hits) / cc.lookups : 0.0, shared.splits,
             shared.store->file_pages() * 4.0, shared.cluster_seconds, 1e3 * shared.select_seconds / steps,
             1e3 * shared.update_seconds / steps) +
         describe_centroid_spill(shared) + describe_virtual_cache(shared);
}

std::string describe_virtual_cache(const RetrievalShared& shared) {
  if (!shared.virtualizer) return "";
  const VirtualCacheCounters& v = shared.virtualizer->counters();
  return fmt::format(
      "; cache per layer ({} KiB each): at most {:.1f} KiB in RAM with {:.1f} KiB being read back, {} clusters "
      "parked, {} read back ({:.1f} KiB, {} changed meanwhile), {:.3f} ms waiting per decode step",
      shared.config.cache_kb, shared.cache->counters().peak_bytes / 1024.0, v.peak_in_flight_bytes / 1024.0, v.parked,
      v.restored, v.read_bytes / 1024.0, v.stale, 1e3 * v.wait_seconds / std::max<int64_t>(1, shared.step));
}

std::string describe_centroid_spill(const RetrievalShared& shared) {
  if (!shared.centroid_spill) return "";
  const CentroidSpillCounters c = shared.centroid_spill->counters();
  return fmt::format(
      "; centroids on storage: at most {:.1f} KiB in RAM, read {:.1f} KiB in {} reads ({} read ahead, {} waited "
      "for from the start, {:.3f} ms waiting per decode step), wrote {:.1f} KiB",
      c.peak_held_bytes / 1024.0, c.read_bytes / 1024.0, c.reads, c.read_ahead, c.demand_reads,
      1e3 * c.wait_seconds / std::max<int64_t>(1, shared.step), c.written_bytes / 1024.0);
}

nlohmann::json storage_io_json(const RetrievalShared& shared) {
  const auto& io = shared.store->counters();
  const auto& cc = shared.cache->counters();
  return {{"strategy", shared.config.name()},
          {"decode_steps", shared.step},
          {"read_bytes", io.read_bytes},
          {"read_ops", io.read_ops},
          {"read_seconds", io.read_seconds},
          {"written_bytes", io.written_bytes},
          {"cache_lookups", cc.lookups},
          {"cache_hits", cc.hits},
          {"splits", shared.splits},
          {"store_bytes", shared.store->file_pages() * PageStore::kPageBytes},
          {"retrieved_entries", shared.retrieved_entries},
          {"cluster_seconds", shared.cluster_seconds},
          {"select_seconds", shared.select_seconds},
          {"update_seconds", shared.update_seconds},
          {"io_wait_seconds", shared.io_wait_seconds},
          {"cache_peak_bytes", cc.peak_bytes},
          {"centroids", centroid_spill_json(shared)},
          {"virtual_cache", virtual_cache_json(shared)}};
}

nlohmann::json virtual_cache_json(const RetrievalShared& shared) {
  if (!shared.virtualizer) return {{"on", false}};
  const VirtualCacheCounters& v = shared.virtualizer->counters();
  return {{"on", true},
          {"parked", v.parked},
          {"restored", v.restored},
          {"stale", v.stale},
          {"read_bytes", v.read_bytes},
          {"peak_in_flight_bytes", v.peak_in_flight_bytes},
          {"wait_seconds", v.wait_seconds}};
}

nlohmann::json centroid_spill_json(const RetrievalShared& shared) {
  if (!shared.centroid_spill) return {{"on", "ram"}};
  const CentroidSpillCounters c = shared.centroid_spill->counters();
  return {{"on", "storage"},
          {"peak_ram_bytes", c.peak_held_bytes},
          {"read_bytes", c.read_bytes},
          {"reads", c.reads},
          {"read_ahead", c.read_ahead},
          {"demand_reads", c.demand_reads},
          {"wait_seconds", c.wait_seconds},
          {"written_bytes", c.written_bytes},
          {"writes", c.writes},
          {"direct_io", shared.centroid_spill->direct()}};
}

}  // namespace kvc::retrieval
