// kvc-cluster build / verify: a committed store + index, and the check that never trusts torn data.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "replay.h"
#include "retrieval/index_file.h"
#include "util/error.h"

namespace kvc::cluster_cli {
namespace rt = kvc::retrieval;

int run_build(const BuildOptions& o) {
  const rt::RetrievalConfig config = rt::RetrievalConfig::parse(o.strategy);
  KVC_CHECK(config.strategy != rt::Strategy::kNone, "--strategy none has no clusters to build; pick adaptive, static or local");
  auto model = o.model.load_model();
  const std::vector<int> prompt = o.prompt.tokens(o.model, *model);
  const ModelConfig& mc = model->config();
  const AttentionShape shape{mc.num_heads, mc.num_kv_heads, mc.head_dim, mc.sliding_window};
  auto shared = rt::make_retrieval_shared(config, mc.head_dim, o.store, false);
  KVCache cache = model->new_cache(rt::retrieval_layer_factory(shape, model->rope(), shared));
  ForwardOptions last;
  last.all_logits = false;
  model->forward(prompt, cache, last);
  std::vector<rt::RetrievalLayerCache*> layers;
  for (int64_t l = 0; l < cache.num_layers(); ++l) layers.push_back(dynamic_cast<rt::RetrievalLayerCache*>(&cache.layer(l)));
  rt::write_index(o.index, *shared, layers, o.model.model_dir);
  const rt::LoadedIndex index = rt::read_index(o.index);
  rt::PageStore::verify(index.store_path, index.manifest);
  if (o.json) {
    nlohmann::json j = {{"store", o.store}, {"index", o.index}, {"clusters", index.clusters},
                        {"entries", index.entries}, {"thresholds", index.thresholds},
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
  const rt::LoadedIndex index = rt::read_index(o.index);
  rt::PageStore::verify(index.store_path, index.manifest);
  if (o.json) {
    nlohmann::json j = {{"index", o.index}, {"store", index.store_path}, {"status", "complete"},
                        {"clusters", index.clusters}, {"entries", index.entries}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("kvc-cluster: store %s is complete: %lld clusters, %lld entries, every page checksum matches\n",
                index.store_path.c_str(), static_cast<long long>(index.clusters), static_cast<long long>(index.entries));
  }
  return 0;
}

}  // namespace kvc::cluster_cli
