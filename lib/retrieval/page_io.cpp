#include "retrieval/page_io.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "retrieval/page_store.h"
#include "util/error.h"

namespace kvc::retrieval {

AlignedBytes aligned_bytes(int64_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, PageStore::kPageBytes, static_cast<size_t>(std::max<int64_t>(n, PageStore::kPageBytes))) != 0)
    fail("out of memory for a {}-byte I/O buffer", n);
  std::memset(p, 0, static_cast<size_t>(n));
  return AlignedBytes(static_cast<uint8_t*>(p));
}

void full_pread(int fd, uint8_t* buffer, int64_t bytes, int64_t offset, const std::string& path) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, buffer + done, static_cast<size_t>(bytes - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    KVC_CHECK(n > 0, "store '{}': read of {} bytes at offset {} failed ({}): the file is truncated or unreadable", path,
              bytes, offset + done, n < 0 ? std::strerror(errno) : "end of file");
    done += n;
  }
}

void full_pwrite(int fd, const uint8_t* buffer, int64_t bytes, int64_t offset, const std::string& path) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pwrite(fd, buffer + done, static_cast<size_t>(bytes - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    KVC_CHECK(n > 0, "'{}': write of {} bytes at offset {} failed: {}", path, bytes, offset + done,
              n < 0 ? std::strerror(errno) : "no progress (is the disk full?)");
    done += n;
  }
}

}  // namespace kvc::retrieval
