#include "retrieval/index_file.h"

#include <cstring>

#include "io/safetensors.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::retrieval {

void write_index(const std::string& path, RetrievalShared& shared, const std::vector<RetrievalLayerCache*>& layers,
                 const std::string& model_dir, const std::string& store_as_recorded) {
  PageStore& store = *shared.store;
  const int64_t d = store.dim();
  std::vector<float> centroids, variances, thresholds;
  std::vector<int64_t> clusters, entry_map, extents;
  int64_t kv = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    layers[l]->bring_centroids_back();
    const auto& heads = layers[l]->heads();
    kv = static_cast<int64_t>(heads.size());
    for (size_t h = 0; h < heads.size(); ++h) {
      thresholds.push_back(static_cast<float>(heads[h].threshold()));
      for (size_t j = 0; j < heads[h].clusters().size(); ++j) {
        const Cluster& c = heads[h].clusters()[j];
        centroids.insert(centroids.end(), heads[h].centroid(j), heads[h].centroid(j) + d);
        variances.push_back(static_cast<float>(c.stats.variance()));
        clusters.insert(clusters.end(), {c.uid, static_cast<int64_t>(l), static_cast<int64_t>(h), c.stats.n});
        EntryBlock members = store.read({c.uid}).front();
        members.append(c.delayed);
        for (int64_t pos : members.positions)
          entry_map.insert(entry_map.end(), {static_cast<int64_t>(l), static_cast<int64_t>(h), pos, c.uid});
      }
    }
  }
  // The store replaces its previous file only once its index is on disk too, just before the index
  // replaces its own: a build that fails (a full disk under the index) leaves the old pair intact.
  const StoreManifest m = store.commit(/*publish=*/false);
  for (const ExtentRecord& e : m.extents) {
    int64_t digest;
    std::memcpy(&digest, &e.digest, 8);
    extents.insert(extents.end(), {e.uid, e.run_first_page, e.full_pages, e.tail_page, e.tail_count, digest});
  }
  const int64_t U = static_cast<int64_t>(variances.size());
  st::SafetensorsWriter w;
  w.add("centroids", st::DType::F32, {U, d}, centroids.data(), centroids.size() * 4);
  w.add("variances", st::DType::F32, {U}, variances.data(), variances.size() * 4);
  w.add("clusters", st::DType::I64, {U, 4}, clusters.data(), clusters.size() * 8);
  w.add("entry_cluster", st::DType::I64, {static_cast<int64_t>(entry_map.size() / 4), 4}, entry_map.data(),
        entry_map.size() * 8);
  w.add("extents", st::DType::I64, {static_cast<int64_t>(m.extents.size()), 6}, extents.data(), extents.size() * 8);
  w.add("thresholds", st::DType::F32, {static_cast<int64_t>(layers.size()), kv}, thresholds.data(),
        thresholds.size() * 4);
  w.set_metadata("format", "kvc-cluster-index");
  w.set_metadata("store", store_as_recorded.empty() ? store.path() : store_as_recorded);
  w.set_metadata("generation", std::to_string(m.generation));
  w.set_metadata("head_dim", std::to_string(d));
  w.set_metadata("page_bytes", std::to_string(m.page_bytes));
  w.set_metadata("key_type", std::to_string(static_cast<int64_t>(m.key_type)));
  w.set_metadata("value_type", std::to_string(static_cast<int64_t>(m.value_type)));
  w.set_metadata("file_pages", std::to_string(m.file_pages));
  w.set_metadata("strategy", shared.config.name());
  w.set_metadata("model", model_dir);
  w.write(path, [&store] { store.publish(); });
}

}  // namespace kvc::retrieval
