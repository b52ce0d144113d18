#include "tokenizer/spm_model_check.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "util/error.h"

namespace kvc {
namespace {

// Protobuf wire format: a field key is a varint (field number << 3 | wire type).
class ProtoReader {
 public:
  ProtoReader(const std::string& bytes, size_t begin, size_t end, const std::string& path)
      : bytes_(bytes), at_(begin), end_(end), path_(path) {}
  bool done() const { return at_ >= end_; }

  uint64_t varint() {
    uint64_t value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      KVC_CHECK(at_ < end_, "'{}' is not a SentencePiece model: a number runs past the end of its field", path_);
      const auto byte = static_cast<uint8_t>(bytes_[at_++]);
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail("'{}' is not a SentencePiece model: a number is longer than 10 bytes", path_);
  }

  // Reads one field; for length-delimited fields sets [begin, end) to its payload.
  void field(uint64_t& number, size_t& begin, size_t& end) {
    const uint64_t key = varint();
    number = key >> 3;
    begin = end = at_;
    switch (key & 7) {
      case 0: (void)varint(); break;
      case 1: skip(8); break;
      case 5: skip(4); break;
      case 2: {
        const uint64_t length = varint();
        KVC_CHECK(length <= end_ - at_, "'{}' is not a SentencePiece model: field {} claims {} bytes, {} are left",
                  path_, number, length, end_ - at_);
        begin = at_;
        end = at_ + static_cast<size_t>(length);
        at_ = end;
        break;
      }
      default: fail("'{}' is not a SentencePiece model: field {} has wire type {}", path_, number, key & 7);
    }
    end = std::max(end, begin);
  }

 private:
  void skip(size_t count) {
    KVC_CHECK(count <= end_ - at_, "'{}' is not a SentencePiece model: a field runs past the end", path_);
    at_ += count;
  }
  const std::string& bytes_;
  size_t at_, end_;
  const std::string& path_;
};

// darts-clone's unit encoding (darts.h, DoubleArrayUnit).
bool has_leaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t value_of(uint32_t unit) { return unit & ((1U << 31) - 1); }
uint32_t label_of(uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); }

// The map is a little-endian uint32 trie size, the trie's units, then NUL-terminated replacement
// strings that leaf values index. Every node reachable from the root is visited once and every byte
// tried from it, as the library's prefix search may; each unit and string it would read must exist.
void check_charsmap(const std::string& bytes, size_t begin, size_t end, const std::string& path) {
  if (begin == end) return;  // no map: the identity normalizer
  const auto bad = [&](const std::string& what) {
    fail(
        "'{}': the normalizer's precompiled character map is damaged ({}); use the model's original "
        "tokenizer.model",
        path, what);
  };
  if (end - begin < 4) bad("shorter than its 4-byte header");
  uint32_t trie_bytes = 0;
  std::memcpy(&trie_bytes, bytes.data() + begin, 4);
  // The strings after the trie hold at least one NUL byte.
  if (trie_bytes == 0 || trie_bytes % 4 != 0 || size_t{4} + trie_bytes >= end - begin)
    bad("its trie size does not fit the map");
  const size_t units = trie_bytes / 4;
  std::vector<uint32_t> trie(units);
  std::memcpy(trie.data(), bytes.data() + begin + 4, trie_bytes);
  const char* strings = bytes.data() + begin + 4 + trie_bytes;
  const size_t strings_size = end - begin - 4 - trie_bytes;
  std::vector<uint8_t> seen(units, 0);
  std::vector<uint32_t> pending;
  const uint32_t root = offset_of(trie[0]);  // node_pos = 0 ^ offset(unit 0)
  pending.push_back(root);
  while (!pending.empty()) {
    const uint32_t node = pending.back();
    pending.pop_back();
    if (node >= units) bad("the trie's root points past its end");
    if (seen[node]) continue;
    seen[node] = 1;
    for (uint32_t c = 0; c < 256; ++c) {
      const uint32_t at = node ^ c;
      if (at >= units) bad("a trie index points past its end");
      const uint32_t unit = trie[at];
      if (label_of(unit) != c) continue;
      const uint32_t next = at ^ offset_of(unit);
      if (next >= units) bad("a trie offset points past its end");
      if (has_leaf(unit)) {
        const uint32_t value = value_of(trie[next]);
        if (value >= strings_size || std::memchr(strings + value, '\0', strings_size - value) == nullptr)
          bad("a replacement string lies outside the map");
      }
      if (!seen[next]) pending.push_back(next);
    }
  }
}

void check_normalizer(const std::string& bytes, size_t begin, size_t end, const std::string& path) {
  ProtoReader spec(bytes, begin, end, path);
  while (!spec.done()) {
    uint64_t number;
    size_t field_begin, field_end;
    spec.field(number, field_begin, field_end);
    if (number == 2) check_charsmap(bytes, field_begin, field_end, path);  // precompiled_charsmap
  }
}

}  // namespace

void check_sentencepiece_model(const std::string& bytes, const std::string& path) {
  KVC_CHECK(!bytes.empty(), "'{}' is empty, not a SentencePiece model", path);
  ProtoReader model(bytes, 0, bytes.size(), path);
  while (!model.done()) {
    uint64_t number;
    size_t begin, end;
    model.field(number, begin, end);
    if (number == 3 || number == 5) check_normalizer(bytes, begin, end, path);  // normalizer_spec, denormalizer_spec
  }
}

}  // namespace kvc
