#include "retrieval/page_format.h"

#include <cstring>

#include "retrieval/page_store.h"

namespace kvc::retrieval {

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  static const auto table = [] {
    std::vector<uint32_t> t(256);
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

uint32_t page_crc(const uint8_t* page, int64_t record_bytes) {
  PageHeader h;
  std::memcpy(&h, page, sizeof h);
  uint32_t c = crc32(&h.uid, 8);
  return crc32(page + PageStore::kHeaderBytes, static_cast<size_t>(h.count * record_bytes), c);
}

uint64_t digest_of(const std::vector<uint32_t>& crcs) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint32_t c : crcs) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

void read_page_records(const uint8_t* page, int64_t count, int64_t dim, EntryBlock& out) {
  const int64_t record_bytes = 8 * dim + 8;
  const uint8_t* rec = page + PageStore::kHeaderBytes;
  for (int64_t i = 0; i < count; ++i, rec += record_bytes) {
    int64_t pos;
    std::memcpy(&pos, rec + 8 * dim, 8);
    out.push(reinterpret_cast<const float*>(rec), reinterpret_cast<const float*>(rec + 4 * dim), pos);
  }
}

}  // namespace kvc::retrieval
