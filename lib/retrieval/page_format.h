#pragma once
// The bytes of a page store file (layout in page_store.h): the file header's magic, each page's
// header and checksum, the records a page holds, and the digest that ties a cluster's pages to the
// index. Shared by the store that writes pages and the checks that read them back.
#include <cstddef>
#include <cstdint>
#include <string>
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
// The element type of a record's key or value row, as --cache-type-k/-v name them; the value is the
// code the store's header page and index hold (0 = f32, so stores written before typed records read
// as f32). Torch-free, so the store's readers build for fuzzing without LibTorch.
enum class RecordType : int64_t { kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3, kQ4_0 = 4 };

// "f32", "f16", "bf16", "q8_0", "q4_0"; false for a code that names no type.
bool record_type_of_code(int64_t code, RecordType* out);
std::string record_type_name(RecordType type);
bool is_block_record(RecordType type);  // q8_0 / q4_0: 32-value blocks with one half scale
// Bytes one row of `dim` values takes (a whole number of blocks for the block types).
int64_t record_row_bytes(RecordType type, int64_t dim);

// One record on storage: the rotated key row, the value row (each in its type), then the int64 position.
struct RecordFormat {
  int64_t dim = 0;
  RecordType keys = RecordType::kF32, values = RecordType::kF32;

  int64_t key_bytes() const { return record_row_bytes(keys, dim); }
  int64_t value_bytes() const { return record_row_bytes(values, dim); }
  int64_t record_bytes() const { return key_bytes() + value_bytes() + 8; }
};

// Writes records [begin, begin + count) of `block` one after another at `out`.
void encode_records(uint8_t* out, const RecordFormat& format, const EntryBlock& block, int64_t begin, int64_t count);
// Appends the first `count` records of `page` to `out`, widened to fp32.
void read_page_records(const uint8_t* page, int64_t count, const RecordFormat& format, EntryBlock& out);
// Replaces the keys and values of entries first.. of `block` by what they read back as after a trip
// through storage, so entries still in a RAM tail and entries read from a page are the same numbers.
void round_through_storage(const RecordFormat& format, EntryBlock& block, int64_t first = 0);

}  // namespace kvc::retrieval
