#include "util/hash.h"

#include <fstream>
#include <vector>

#include "util/error.h"
#include "util/standard_input.h"

namespace kvc {

uint64_t fnv1a64(const void* data, size_t size, uint64_t seed) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  uint64_t h = seed;
  for (size_t i = 0; i < size; ++i) {
    h ^= bytes[i];
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string hex64(uint64_t value) { return fmt::format("{:016x}", value); }

static uint64_t hash_file_into(const std::string& path, uint64_t seed) {
  std::ifstream in(input_path(path), std::ios::binary);
  KVC_CHECK(in.good(), "cannot open '{}' to hash it", path);
  std::vector<char> buffer(1 << 20);
  uint64_t h = seed;
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    h = fnv1a64(buffer.data(), static_cast<size_t>(in.gcount()), h);
  }
  return h;
}

std::string hash_file(const std::string& path) { return hex64(hash_file_into(path, 0xcbf29ce484222325ULL)); }

std::string hash_files(const std::vector<std::string>& paths) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : paths) h = hash_file_into(p, h);
  return hex64(h);
}

std::string hash_string(const std::string& text) { return hex64(fnv1a64(text.data(), text.size())); }

}  // namespace kvc
