#include "io/checkpoint_trailer.h"

#include <cstdint>
#include <cstring>

#include "util/error.h"
#include "util/hash.h"

namespace kvc {
namespace {

constexpr char kCheckpointMagic[8] = {'K', 'V', 'C', 'C', 'K', 'P', 'T', '1'};
constexpr size_t kTrailerBytes = 24;

}  // namespace

std::string seal_checkpoint(const std::string& archive) {
  std::string out = archive;
  const uint64_t length = archive.size();
  const uint64_t hash = fnv1a64(archive.data(), archive.size());
  out.append(kCheckpointMagic, 8);
  out.append(reinterpret_cast<const char*>(&length), 8);
  out.append(reinterpret_cast<const char*>(&hash), 8);
  return out;
}

std::string checkpoint_archive(const std::string& file, const std::string& path) {
  KVC_CHECK(
      file.size() >= kTrailerBytes && std::memcmp(file.data() + file.size() - kTrailerBytes, kCheckpointMagic, 8) == 0,
      "--resume: '{}' has no kvc checksum trailer (damaged, cut short, or not a kvc-train checkpoint); start "
      "again without --resume",
      path);
  uint64_t length = 0, hash = 0;
  std::memcpy(&length, file.data() + file.size() - 16, 8);
  std::memcpy(&hash, file.data() + file.size() - 8, 8);
  KVC_CHECK(length == file.size() - kTrailerBytes,
            "--resume: '{}' is {} bytes where its trailer says {}: the file is damaged; start again without --resume",
            path, file.size(), length + kTrailerBytes);
  KVC_CHECK(fnv1a64(file.data(), length) == hash,
            "--resume: '{}' fails its checksum: the file is damaged; start again without --resume", path);
  return file.substr(0, length);
}

}  // namespace kvc
