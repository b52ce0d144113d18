// Checkpoint: one model folder, single-file or sharded, seen as one set of named tensors.
#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::st {

using nlohmann::json;

Checkpoint Checkpoint::open_dir(const std::string& dir) {
  KVC_CHECK(is_directory(dir), "model folder '{}' does not exist or is not a folder", dir);
  Checkpoint checkpoint(dir);
  const std::string single_path = dir + "/model.safetensors";
  const std::string index_path = dir + "/model.safetensors.index.json";
  if (file_exists(single_path)) {
    const std::shared_ptr<SafetensorsFile> file = SafetensorsFile::open(single_path);
    file->check_all_finite();
    for (const std::string& name : file->names()) checkpoint.file_of_tensor_[name] = file;
  } else if (file_exists(index_path)) {
    checkpoint.load_index(index_path);
  } else {
    fail("model folder '{}' has neither model.safetensors nor model.safetensors.index.json", dir);
  }
  return checkpoint;
}

void Checkpoint::load_index(const std::string& index_path) {
  json index;
  try {
    index = json::parse(read_text_file(index_path));
  } catch (const json::parse_error& e) {
    fail("'{}': not valid JSON (syntax error at byte {})", index_path, e.byte);
  } catch (const json::exception& e) {  // e.g. a number too large for any type (out_of_range)
    fail("'{}': not valid JSON ({})", index_path, e.what());
  }
  KVC_CHECK(index.is_object(), "'{}': not a JSON object", index_path);
  const auto weight_map = index.find("weight_map");
  KVC_CHECK(weight_map != index.end(), "'{}': missing 'weight_map'", index_path);
  KVC_CHECK(weight_map->is_object(), "'{}': 'weight_map' is not a JSON object", index_path);

  std::map<std::string, std::shared_ptr<SafetensorsFile>> shards;  // each shard mapped once
  for (const auto& [name, shard_value] : weight_map->items()) {
    KVC_CHECK(shard_value.is_string(), "'{}': 'weight_map' entry of '{}' is not a string", index_path, name);
    const std::string shard_name = shard_value.get<std::string>();
    std::shared_ptr<SafetensorsFile>& shard = shards[shard_name];
    if (!shard) {
      const std::string shard_path = dir_ + "/" + shard_name;
      KVC_CHECK(file_exists(shard_path) && !is_directory(shard_path),
                "'{}': shard file '{}' (listed for tensor '{}') is missing", index_path, shard_path, name);
      shard = SafetensorsFile::open(shard_path);
      shard->check_all_finite();
    }
    KVC_CHECK(shard->contains(name), "'{}': tensor '{}' is listed but absent from its shard '{}'", index_path, name,
              shard->path());
    file_of_tensor_[name] = shard;
  }
}

std::shared_ptr<SafetensorsFile> Checkpoint::file_of(const std::string& name) const {
  const auto it = file_of_tensor_.find(name);
  KVC_CHECK(it != file_of_tensor_.end(), "tensor '{}' not found in checkpoint '{}'", name, dir_);
  return it->second;
}

const TensorInfo& Checkpoint::info(const std::string& name) const { return file_of(name)->info(name); }

const uint8_t* Checkpoint::data(const std::string& name) const { return file_of(name)->data(name); }

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> names;
  names.reserve(file_of_tensor_.size());
  for (const auto& entry : file_of_tensor_) names.push_back(entry.first);
  return names;
}

}  // namespace kvc::st
