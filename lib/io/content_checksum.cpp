#include "io/content_checksum.h"

#include <algorithm>
#include <cstring>

#include "util/hash.h"

namespace kvc::st {
namespace {

constexpr uint64_t kPrime = 0x100000001b3ULL;

}  // namespace

void ContentChecksum::block(const uint8_t* bytes) {
  for (int lane = 0; lane < 4; ++lane) {
    uint64_t word;
    std::memcpy(&word, bytes + 8 * lane, 8);
    lanes_[lane] = (lanes_[lane] ^ word) * kPrime;
  }
}

void ContentChecksum::update(const void* data, uint64_t size) {
  if (size == 0) return;  // an empty tensor's bytes may be a null pointer, which memcpy must not get
  const auto* bytes = static_cast<const uint8_t*>(data);
  total_ += size;
  if (pending_size_ > 0) {
    const uint64_t take = std::min<uint64_t>(size, 32 - pending_size_);
    std::memcpy(pending_ + pending_size_, bytes, take);
    pending_size_ += take;
    bytes += take;
    size -= take;
    if (pending_size_ < 32) return;
    block(pending_);
    pending_size_ = 0;
  }
  for (; size >= 32; bytes += 32, size -= 32) block(bytes);
  std::memcpy(pending_, bytes, size);
  pending_size_ = size;
}

std::string ContentChecksum::finish() {
  // The tail is zero-padded into one last block; the length joins the fold, so padding cannot collide
  // with real zero bytes.
  std::memset(pending_ + pending_size_, 0, 32 - pending_size_);
  if (pending_size_ > 0) block(pending_);
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const uint64_t value : {lanes_[0], lanes_[1], lanes_[2], lanes_[3], total_}) h = (h ^ value) * kPrime;
  h ^= h >> 29;  // the top bits of a product depend on every bit below; fold them down
  return "w4fnv64:" + hex64(h);
}

}  // namespace kvc::st
