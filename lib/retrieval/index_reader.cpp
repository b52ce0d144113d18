#include "retrieval/index_reader.h"

#include <cstring>
#include <set>

#include "io/safetensors.h"
#include "util/checked_number.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::retrieval {

namespace {

std::string required_metadata(const st::SafetensorsFile& file, const std::string& key) {
  const auto it = file.metadata().find(key);
  KVC_CHECK(it != file.metadata().end(), "index '{}': metadata '{}' is missing", file.path(), key);
  return it->second;
}

int64_t metadata_count(const st::SafetensorsFile& file, const std::string& key) {
  const std::string text = required_metadata(file, key);
  const auto value = parse_integer(text);
  KVC_CHECK(value && *value >= 0, "index '{}': metadata '{}' is '{}', not a count", file.path(), key, text);
  return *value;
}

// A tensor of the expected dtype and rank, with `columns` columns when given (the record width).
const st::TensorInfo& required_tensor(const st::SafetensorsFile& file, const std::string& name, st::DType dtype,
                                      size_t rank, int64_t columns = -1) {
  KVC_CHECK(file.contains(name), "index '{}': tensor '{}' is missing", file.path(), name);
  const st::TensorInfo& info = file.info(name);
  KVC_CHECK(info.dtype == dtype && info.shape.size() == rank && (columns < 0 || info.shape.back() == columns),
            "index '{}': tensor '{}' has the wrong dtype or shape", file.path(), name);
  return info;
}

}  // namespace

LoadedIndex read_index(const std::string& path) {
  KVC_CHECK(file_exists(path),
            "index '{}' not found: the store has no commit record (build it with kvc-cluster build; a run killed "
            "before its commit leaves the store incomplete)",
            path);
  const auto file = st::SafetensorsFile::open(path);
  const auto& meta = file->metadata();
  KVC_CHECK(meta.count("format") && meta.at("format") == "kvc-cluster-index",
            "'{}' is not a kvc-cluster index (no format=kvc-cluster-index metadata)", path);
  LoadedIndex out;
  out.store_path = required_metadata(*file, "store");
  out.manifest.generation = static_cast<uint64_t>(metadata_count(*file, "generation"));
  out.manifest.dim = metadata_count(*file, "head_dim");
  out.manifest.page_bytes = metadata_count(*file, "page_bytes");
  // Indexes written before typed records have no types: their records are f32.
  const auto record_type = [&](const char* key) {
    RecordType t = RecordType::kF32;
    KVC_CHECK(!meta.count(key) || record_type_of_code(metadata_count(*file, key), &t),
              "index '{}': unknown record type {} in '{}'", path, meta.count(key) ? meta.at(key) : "", key);
    return t;
  };
  out.manifest.key_type = record_type("key_type");
  out.manifest.value_type = record_type("value_type");
  out.manifest.file_pages = metadata_count(*file, "file_pages");
  const auto& ext = required_tensor(*file, "extents", st::DType::I64, 2, 6);
  const auto* e = reinterpret_cast<const int64_t*>(file->data("extents"));
  for (int64_t i = 0; i < ext.shape[0]; ++i, e += 6) {
    ExtentRecord r{e[0], e[1], e[2], e[3], e[4], 0};
    std::memcpy(&r.digest, &e[5], 8);
    out.manifest.extents.push_back(r);
  }
  const auto& th = required_tensor(*file, "thresholds", st::DType::F32, 2);
  file->check_finite("thresholds");
  const auto* t = reinterpret_cast<const float*>(file->data("thresholds"));
  out.thresholds.assign(static_cast<size_t>(th.shape[0]), std::vector<double>(static_cast<size_t>(th.shape[1])));
  for (int64_t l = 0; l < th.shape[0]; ++l)
    for (int64_t h = 0; h < th.shape[1]; ++h) out.thresholds[l][h] = t[l * th.shape[1] + h];
  KVC_CHECK(file->contains("clusters") && !file->info("clusters").shape.empty(),
            "index '{}': tensor 'clusters' is missing or has no rows", path);
  KVC_CHECK(file->contains("entry_cluster") && !file->info("entry_cluster").shape.empty(),
            "index '{}': tensor 'entry_cluster' is missing or has no rows", path);
  out.clusters = file->info("clusters").shape[0];
  out.entries = file->info("entry_cluster").shape[0];
  // The commit record covers every cluster: an index whose extents were emptied or cut holds clusters
  // the store's check would never read, and must not verify as complete.
  const auto& clusters = required_tensor(*file, "clusters", st::DType::I64, 2, 4);
  KVC_CHECK(clusters.shape[0] == ext.shape[0],
            "index '{}': {} clusters but {} extents in the commit record; the index "
            "is damaged: build the store again",
            path, clusters.shape[0], ext.shape[0]);
  std::set<int64_t> extent_uids;
  for (const ExtentRecord& r : out.manifest.extents) extent_uids.insert(r.uid);
  const auto* c = reinterpret_cast<const int64_t*>(file->data("clusters"));
  for (int64_t i = 0; i < clusters.shape[0]; ++i) {
    KVC_CHECK(extent_uids.count(c[i * 4]) == 1,
              "index '{}': cluster {} has no extent in the commit record; the index "
              "is damaged: build the store again",
              path, c[i * 4]);
  }
  return out;
}

}  // namespace kvc::retrieval
