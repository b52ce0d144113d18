#include "retrieval/page_format.h"

#include <cstring>

#include "cache/cache_types.h"
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

int64_t record_type_code(at::ScalarType type) {
  if (type == at::kFloat) return 0;
  if (type == at::kHalf) return 1;
  if (type == at::kBFloat16) return 2;
  if (type == kCacheQ8_0) return 3;
  if (type == kCacheQ4_0) return 4;
  return -1;
}

at::ScalarType record_type_of_code(int64_t code) {
  switch (code) {
    case 0: return at::kFloat;
    case 1: return at::kHalf;
    case 2: return at::kBFloat16;
    case 3: return kCacheQ8_0;
    case 4: return kCacheQ4_0;
    default: return at::ScalarType::Undefined;
  }
}

namespace {

// Rows [n, d] of fp32 as stored in `type` ([n, stored bytes] as raw bytes).
at::Tensor encoded(const float* rows, int64_t n, int64_t d, at::ScalarType type) {
  const at::Tensor x = at::from_blob(const_cast<float*>(rows), {n, d}, at::kFloat);
  const at::Tensor stored = encode_rows(x, type).contiguous();
  return stored.view(at::kByte).view({n, stored_row_bytes(type, d)});
}

// Stored rows (raw bytes [n, row_bytes] at `bytes`, `stride` apart) back to fp32 [n, d].
at::Tensor decoded(const uint8_t* bytes, int64_t n, int64_t stride, int64_t d, at::ScalarType type) {
  const int64_t row_bytes = stored_row_bytes(type, d);
  const at::Tensor raw = at::from_blob(const_cast<uint8_t*>(bytes), {n, row_bytes}, {stride, 1}, at::kByte).contiguous();
  const at::Tensor stored = is_block_format(type) ? raw : raw.view(type);
  return decode_rows(stored, type, d, at::kFloat).contiguous();
}

}  // namespace

void encode_records(uint8_t* out, const RecordFormat& f, const EntryBlock& block, int64_t begin, int64_t count) {
  if (count == 0) return;
  const int64_t d = f.dim, kb = f.key_bytes(), vb = f.value_bytes(), rb = f.record_bytes();
  const at::Tensor keys = encoded(block.key(begin), count, d, f.keys);
  const at::Tensor values = encoded(block.value(begin), count, d, f.values);
  const uint8_t* k = keys.data_ptr<uint8_t>();
  const uint8_t* v = values.data_ptr<uint8_t>();
  for (int64_t i = 0; i < count; ++i, out += rb) {
    std::memcpy(out, k + i * kb, static_cast<size_t>(kb));
    std::memcpy(out + kb, v + i * vb, static_cast<size_t>(vb));
    std::memcpy(out + kb + vb, &block.positions[static_cast<size_t>(begin + i)], 8);
  }
}

void read_page_records(const uint8_t* page, int64_t count, const RecordFormat& f, EntryBlock& out) {
  if (count == 0) return;
  const int64_t d = f.dim, kb = f.key_bytes(), vb = f.value_bytes(), rb = f.record_bytes();
  const uint8_t* rec = page + PageStore::kHeaderBytes;
  const at::Tensor keys = decoded(rec, count, rb, d, f.keys);
  const at::Tensor values = decoded(rec + kb, count, rb, d, f.values);
  const float* k = keys.data_ptr<float>();
  const float* v = values.data_ptr<float>();
  for (int64_t i = 0; i < count; ++i) {
    int64_t pos;
    std::memcpy(&pos, rec + i * rb + kb + vb, 8);
    out.push(k + i * d, v + i * d, pos);
  }
}

void round_through_storage(const RecordFormat& f, EntryBlock& block) {
  const int64_t n = block.size(), d = f.dim;
  if (n == 0) return;
  const auto round = [&](std::vector<float>& rows, at::ScalarType type) {
    if (type == at::kFloat) return;
    const at::Tensor bytes = encoded(rows.data(), n, d, type);
    const at::Tensor back = decoded(bytes.data_ptr<uint8_t>(), n, bytes.size(1), d, type);
    std::memcpy(rows.data(), back.data_ptr<float>(), static_cast<size_t>(n * d) * sizeof(float));
  };
  round(block.keys, f.keys);
  round(block.values, f.values);
}

}  // namespace kvc::retrieval
