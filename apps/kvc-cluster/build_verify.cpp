// kvc-cluster build / verify: a committed store + index, and the check that never trusts torn data.
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "replay.h"
#include "retrieval/index_file.h"
#include "retrieval/retrieval_setup.h"
#include "util/error.h"
#include "util/files.h"
#include "util/progress.h"
#include "util/run_files.h"

namespace kvc::cluster_cli {
namespace rt = kvc::retrieval;
namespace fs = std::filesystem;
namespace {

// A relative store path is read from the index's folder; indexes that recorded a path from the
// working directory of their build still verify from there.
std::string resolve_store_path(const std::string& index, const std::string& recorded) {
  const fs::path store(recorded);
  if (store.is_absolute()) return recorded;
  const fs::path beside_index = fs::path(index).parent_path() / store;
  std::error_code ec;
  if (fs::exists(beside_index, ec) || !fs::exists(store, ec)) return beside_index.string();
  return recorded;
}

}  // namespace

int run_build(const BuildOptions& o) {
  const rt::RetrievalConfig config = rt::RetrievalConfig::parse(o.strategy);
  KVC_CHECK(!rt::picks_entries(config.strategy),
            "--strategy {} has no clusters to build; pick adaptive, static or local",
            rt::strategy_name(config.strategy));
  kvc::claim_writable_output(o.store);  // before the prefill and clustering
  kvc::claim_writable_output(o.index);
  auto model = o.model.load_model();
  const std::vector<int> prompt = o.prompt.tokens(o.model, *model);
  const ModelConfig& mc = model->config();
  const AttentionShape shape = mc.attention_shape();
  const fs::path index_path = fs::absolute(o.index);
  const fs::path index_dir = index_path.parent_path();
  KVC_CHECK(fs::is_directory(index_dir), "--index {}: folder '{}' does not exist", o.index, index_dir.string());
  const fs::path store_path = fs::absolute(o.store).lexically_normal();
  // The index records its store relative to the index's own folder, so the pair can move together and
  // `verify` works from any working directory; the files are opened by the paths as given, which every
  // error names.
  const std::string store_from_index = store_path.lexically_relative(index_dir).string();
  const CacheTypes types = model->cache_types();
  auto shared = rt::make_retrieval_shared(config, rt::record_format(mc.head_dim, types), o.store, false);
  std::vector<rt::RetrievalLayerCache*> layers;
  KVCache cache =
      model->new_cache(recording_layers(rt::retrieval_layer_factory(shape, model->rope(), shared), &layers));
  ForwardOptions last;
  last.all_logits = false;
  last.stop_on_interrupt = true;  // Ctrl-C stops between layers; nothing is published
  // A long prompt's pass (clustering each layer as it goes) shows its progress after a second.
  kvc::Progress progress(fmt::format("build {} tokens", prompt.size()), mc.num_layers, "layers", !o.json,
                         /*quiet_for_seconds=*/1.0);
  last.on_layer = [&](int64_t done, int64_t) { progress.set(done); };
  model->forward(prompt, cache, last);
  progress.finish();
  rt::write_index(o.index, *shared, layers, o.model.model_dir, store_from_index);
  rt::LoadedIndex index = rt::read_index(o.index);
  rt::PageStore::verify(resolve_store_path(o.index, index.store_path), index.manifest);
  if (o.json) {
    nlohmann::json j = {{"store", o.store},
                        {"index", o.index},
                        {"clusters", index.clusters},
                        {"entries", index.entries},
                        {"thresholds", index.thresholds},
                        {"store_bytes", index.manifest.file_pages * rt::PageStore::kPageBytes}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("kvc-cluster: %lld clusters, %lld entries, store %s (%lld KiB), index %s\n",
                static_cast<long long>(index.clusters), static_cast<long long>(index.entries), o.store.c_str(),
                static_cast<long long>(index.manifest.file_pages * 4), o.index.c_str());
  }
  return 0;
}

int run_verify(const VerifyOptions& o) {
  rt::LoadedIndex index = rt::read_index(o.index);
  index.store_path = resolve_store_path(o.index, index.store_path);
  rt::PageStore::verify(index.store_path, index.manifest);
  if (o.json) {
    nlohmann::json j = {{"index", o.index},
                        {"store", index.store_path},
                        {"status", "complete"},
                        {"clusters", index.clusters},
                        {"entries", index.entries}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("kvc-cluster: store %s is complete: %lld clusters, %lld entries, every page checksum matches\n",
                index.store_path.c_str(), static_cast<long long>(index.clusters),
                static_cast<long long>(index.entries));
  }
  return 0;
}

}  // namespace kvc::cluster_cli
