#pragma once
// The checksum kvc writes into every safetensors file it makes (`kvc.checksum` in `__metadata__`) and
// verifies when the file is opened, so a changed byte in a basis, a gate or a weight is refused in one
// line instead of giving a different result. It covers the header as written without the checksum
// entry, then the data section. 64-bit words are hashed FNV-1a style in four independent lanes, so it
// runs at memory speed; a change confined to one word always changes the result (each step maps a lane
// one-to-one). The threat is damage, not an adversary.
#include <cstdint>
#include <string>

namespace kvc::st {

inline constexpr char kChecksumKey[] = "kvc.checksum";

class ContentChecksum {
 public:
  void update(const void* data, uint64_t size);
  // "w4fnv64:" and 16 hex digits.
  std::string finish();

 private:
  void block(const uint8_t* bytes);  // 32 bytes: one word per lane

  uint64_t lanes_[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9ce484222325cbf2ULL, 0x2325cbf29ce48422ULL};
  uint8_t pending_[32] = {};
  uint64_t pending_size_ = 0;
  uint64_t total_ = 0;
};

}  // namespace kvc::st
