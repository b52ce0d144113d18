#pragma once
// The bytes of a page store file (layout in page_store.h): the file header's magic, each page's
// header and checksum, the records a page holds, and the digest that ties a cluster's pages to the
// index. Shared by the store that writes pages and the checks that read them back.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "retrieval/entry_block.h"

namespace kvc::retrieval {

inline constexpr uint32_t kPageMagic = 0x4B565047;  // "GPVK"
inline constexpr char kFileMagic[8] = {'K', 'V', 'C', 'S', 'T', 'O', 'R', '1'};

struct PageHeader {
  uint32_t magic, uid, count, crc;
};

uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);
// CRC over (uid, count, records) so a page moved to the wrong cluster also fails.
uint32_t page_crc(const uint8_t* page, int64_t record_bytes);
// A cluster's page CRCs in slot order, folded into the one number the index records at commit.
uint64_t digest_of(const std::vector<uint32_t>& crcs);
// Appends the first `count` records of `page` (rotated key, value, position; `dim` floats each) to `out`.
void read_page_records(const uint8_t* page, int64_t count, int64_t dim, EntryBlock& out);

}  // namespace kvc::retrieval
