// SafetensorsWriter: lays tensors out contiguously and writes the file atomically.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "io/content_checksum.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc::st {

using nlohmann::json;

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data,
                            size_t nbytes) {
  KVC_CHECK(name != "__metadata__", "SafetensorsWriter: '__metadata__' is reserved, not a tensor name");
  KVC_CHECK(tensors_.count(name) == 0, "SafetensorsWriter: tensor '{}' added twice", name);
  const std::optional<uint64_t> expected = checked_nbytes(dtype, shape);
  KVC_CHECK(expected.has_value(), "SafetensorsWriter: tensor '{}' has a negative or oversized shape [{}]", name,
            fmt::join(shape, ", "));
  KVC_CHECK(data != nullptr || nbytes == 0, "SafetensorsWriter: tensor '{}' has {} bytes at a null pointer", name,
            nbytes);
  KVC_CHECK(nbytes == *expected, "SafetensorsWriter: tensor '{}' got {} bytes but shape [{}] of {} needs {}", name,
            nbytes, fmt::join(shape, ", "), dtype_name(dtype), *expected);
  const auto* bytes = static_cast<const uint8_t*>(data);
  tensors_[name] = Pending{dtype, std::move(shape), std::vector<uint8_t>(bytes, bytes + nbytes)};
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

void SafetensorsWriter::write(const std::string& path, const std::function<void()>& before_rename) const {
  // Larger dtypes first keeps every tensor aligned to its own element size without padding holes,
  // which the reference reader would reject.
  std::vector<const std::pair<const std::string, Pending>*> order;
  for (const auto& entry : tensors_) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return dtype_size(a->second.dtype) > dtype_size(b->second.dtype);
  });

  json header = json::object();
  std::map<std::string, std::string> metadata = metadata_;
  metadata.erase(kChecksumKey);  // a checksum copied from the file this one was read from is not this file's
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto* entry : order) {
    const Pending& tensor = entry->second;
    header[entry->first] = {{"dtype", dtype_name(tensor.dtype)},
                            {"shape", tensor.shape},
                            {"data_offsets", {offset, offset + tensor.bytes.size()}}};
    offset += tensor.bytes.size();
  }
  std::string header_text;
  try {
    // The checksum covers the header without its own entry (as a reader rebuilds it), then the data.
    ContentChecksum checksum;
    const std::string unsealed = header.dump();
    checksum.update(unsealed.data(), unsealed.size());
    for (const auto* entry : order) checksum.update(entry->second.bytes.data(), entry->second.bytes.size());
    header["__metadata__"][kChecksumKey] = checksum.finish();
    header_text = header.dump();
  } catch (const json::type_error&) {
    fail("cannot write '{}': a tensor name or metadata string is not valid UTF-8", path);
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');
  KVC_CHECK(header_text.size() <= kMaxHeaderBytes, "cannot write '{}': header of {} bytes exceeds the {} byte limit",
            path, header_text.size(), kMaxHeaderBytes);

  uint8_t length_prefix[8];
  for (int i = 0; i < 8; ++i) length_prefix[i] = static_cast<uint8_t>(header_text.size() >> (8 * i));

  // Streamed rather than via write_file_atomic so the tensors are not copied into one more string.
  OutputFile out(path);
  out.write(length_prefix, sizeof length_prefix);
  out.write(header_text);
  for (const auto* entry : order) out.write(entry->second.bytes.data(), entry->second.bytes.size());
  out.commit(before_rename);
}

}  // namespace kvc::st
