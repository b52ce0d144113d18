#include "retrieval/page_format.h"

#include <algorithm>
#include <cstring>

#include "io/gguf_dequant.h"
#include "io/gguf_quantize.h"
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

bool record_type_of_code(int64_t code, RecordType* out) {
  if (code < 0 || code > static_cast<int64_t>(RecordType::kQ4_0)) return false;
  *out = static_cast<RecordType>(code);
  return true;
}

std::string record_type_name(RecordType type) {
  switch (type) {
    case RecordType::kF32: return "f32";
    case RecordType::kF16: return "f16";
    case RecordType::kBF16: return "bf16";
    case RecordType::kQ8_0: return "q8_0";
    case RecordType::kQ4_0: return "q4_0";
  }
  return "unknown";
}

bool is_block_record(RecordType type) { return type == RecordType::kQ8_0 || type == RecordType::kQ4_0; }

namespace {

uint32_t ggml_type(RecordType type) { return type == RecordType::kQ8_0 ? gguf::kTypeQ8_0 : gguf::kTypeQ4_0; }

// bfloat16 from float, rounding to nearest even as LibTorch does (NaN stays a quiet NaN).
uint16_t float_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

void encode_row(RecordType type, const float* x, int64_t d, uint8_t* out) {
  switch (type) {
    case RecordType::kF32: std::memcpy(out, x, static_cast<size_t>(d) * 4); return;
    case RecordType::kF16:
    case RecordType::kBF16:
      for (int64_t t = 0; t < d; ++t) {
        const uint16_t h = type == RecordType::kF16 ? gguf::float_to_half(x[t]) : float_to_bf16(x[t]);
        std::memcpy(out + 2 * t, &h, 2);
      }
      return;
    case RecordType::kQ8_0:
    case RecordType::kQ4_0: gguf::quantize(ggml_type(type), x, static_cast<uint64_t>(d), out); return;
  }
}

void decode_row(RecordType type, const uint8_t* in, int64_t d, float* out) {
  switch (type) {
    case RecordType::kF32: std::memcpy(out, in, static_cast<size_t>(d) * 4); return;
    case RecordType::kF16:
    case RecordType::kBF16:
      for (int64_t t = 0; t < d; ++t) {
        uint16_t h;
        std::memcpy(&h, in + 2 * t, 2);
        out[t] = type == RecordType::kF16 ? gguf::half_to_float(h) : gguf::bf16_to_float(h);
      }
      return;
    case RecordType::kQ8_0:
    case RecordType::kQ4_0: gguf::dequantize(ggml_type(type), in, static_cast<uint64_t>(d), out); return;
  }
}

}  // namespace

int64_t record_row_bytes(RecordType type, int64_t dim) {
  switch (type) {
    case RecordType::kF32: return 4 * dim;
    case RecordType::kF16:
    case RecordType::kBF16: return 2 * dim;
    case RecordType::kQ8_0:
    case RecordType::kQ4_0:
      return static_cast<int64_t>(gguf::quantized_bytes(ggml_type(type), static_cast<uint64_t>(dim)));
  }
  return 0;
}

void encode_records(uint8_t* out, const RecordFormat& f, const EntryBlock& block, int64_t begin, int64_t count) {
  const int64_t d = f.dim, kb = f.key_bytes(), vb = f.value_bytes(), rb = f.record_bytes();
  for (int64_t i = begin; i < begin + count; ++i, out += rb) {
    encode_row(f.keys, block.key(i), d, out);
    encode_row(f.values, block.value(i), d, out + kb);
    std::memcpy(out + kb + vb, &block.positions[static_cast<size_t>(i)], 8);
  }
}

void read_page_records(const uint8_t* page, int64_t count, const RecordFormat& f, EntryBlock& out) {
  const int64_t d = f.dim, kb = f.key_bytes(), vb = f.value_bytes(), rb = f.record_bytes();
  std::vector<float> key(static_cast<size_t>(d)), value(static_cast<size_t>(d));
  const uint8_t* rec = page + PageStore::kHeaderBytes;
  for (int64_t i = 0; i < count; ++i, rec += rb) {
    decode_row(f.keys, rec, d, key.data());
    decode_row(f.values, rec + kb, d, value.data());
    int64_t pos;
    std::memcpy(&pos, rec + kb + vb, 8);
    out.push(key.data(), value.data(), pos);
  }
}

void round_through_storage(const RecordFormat& f, EntryBlock& block, int64_t first) {
  const int64_t d = f.dim;
  std::vector<uint8_t> row(static_cast<size_t>(std::max(f.key_bytes(), f.value_bytes())));
  const auto round = [&](std::vector<float>& rows, RecordType type) {
    if (type == RecordType::kF32) return;
    for (int64_t i = first; i < block.size(); ++i) {
      encode_row(type, rows.data() + i * d, d, row.data());
      decode_row(type, row.data(), d, rows.data() + i * d);
    }
  };
  round(block.keys, f.keys);
  round(block.values, f.values);
}

}  // namespace kvc::retrieval
