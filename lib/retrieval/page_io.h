#pragma once
// Page-aligned buffers and whole reads: O_DIRECT needs both, and a short read must never pass as data.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

namespace kvc::retrieval {

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
using AlignedBytes = std::unique_ptr<uint8_t, AlignedFree>;

// A buffer of at least `n` bytes (one page at the least), aligned to the page size; the first `n` are zero.
AlignedBytes aligned_bytes(int64_t n);
// Reads exactly `bytes` at `offset`, retrying after signals; throws kvc::Error naming `path` otherwise.
void full_pread(int fd, uint8_t* buffer, int64_t bytes, int64_t offset, const std::string& path);
// Writes exactly `bytes` at `offset`, retrying after signals and short writes; throws kvc::Error naming
// `path` otherwise.
void full_pwrite(int fd, const uint8_t* buffer, int64_t bytes, int64_t offset, const std::string& path);

}  // namespace kvc::retrieval
