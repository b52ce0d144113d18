#pragma once
// Writes a safetensors file again through kvc's writer, which seals it with a fresh kvc.checksum, after
// `edit` changed its tensors' bytes or its metadata: a value a tool could have written, so a test reaches
// the checks behind the checksum (a byte patched in place would fail the checksum first).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace kvc::test {

using TensorBytes = std::map<std::string, std::vector<uint8_t>>;
using Metadata = std::map<std::string, std::string>;

inline void rewrite_safetensors(const std::string& from, const std::string& to,
                                const std::function<void(TensorBytes&, Metadata&)>& edit) {
  const auto file = st::SafetensorsFile::open(from);
  TensorBytes tensors;
  for (const std::string& name : file->names())
    tensors[name].assign(file->data(name), file->data(name) + file->info(name).nbytes());
  Metadata metadata = file->metadata();
  edit(tensors, metadata);
  st::SafetensorsWriter writer;
  for (const auto& [name, bytes] : tensors)
    writer.add(name, file->info(name).dtype, file->info(name).shape, bytes.data(), bytes.size());
  for (const auto& [key, value] : metadata) writer.set_metadata(key, value);
  writer.write(to);
}

}  // namespace kvc::test
