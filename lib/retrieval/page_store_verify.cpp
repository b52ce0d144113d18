// PageStore::verify: a committed store file checked byte for byte against its manifest.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "retrieval/page_format.h"
#include "retrieval/page_io.h"
#include "retrieval/page_store.h"
#include "util/error.h"

namespace kvc::retrieval {

// Every byte of the file is accounted for, so no flip passes unseen:
//  - page 0 (header): magic, generation, page size, head_dim and the key and value record types as the
//    index says; the rest zero.
//  - pages of committed clusters: magic, cluster, record count and CRC over (cluster, count, records);
//    the bytes after the last record are zero (write_page clears them); the digest ties the pages to
//    the index.
//  - every other page below file_pages (a pool's unused slots, pages a dropped or moved cluster left):
//    no read ever touches them, yet each must still be all zero or a whole, checksummed page, so damage
//    there is reported too. Pages past the end of the file are reserved but never written.
//  - nothing beyond file_pages, and only whole pages.
void PageStore::verify(const std::string& path, const StoreManifest& m) {
  // A FIFO or device would block the open or the reads: only a regular file can be the store.
  struct stat kind {};
  KVC_CHECK(::stat(path.c_str(), &kind) != 0 || S_ISREG(kind.st_mode), "store '{}' is not a regular file", path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  KVC_CHECK(fd >= 0, "store '{}' is missing: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  KVC_CHECK(m.page_bytes == kPageBytes && m.dim > 0 && m.dim <= (kPageBytes - kHeaderBytes - 8) / 8 &&
                m.file_pages >= 1 &&
                ((!is_block_record(m.key_type) && !is_block_record(m.value_type)) || m.dim % 32 == 0),
            "store '{}': the index describes an impossible store (page bytes {}, head_dim {}, {} pages)", path,
            m.page_bytes, m.dim, m.file_pages);
  auto page = aligned_bytes(kPageBytes);
  const auto read_page = [&](int64_t index) {
    const ssize_t n = ::pread(fd, page.get(), kPageBytes, index * kPageBytes);
    KVC_CHECK(n == kPageBytes, "store '{}' is incomplete: page {} is missing (file truncated by an interrupted run)",
              path, index);
  };
  const auto zero_from = [&](int64_t offset) {
    for (int64_t i = offset; i < kPageBytes; ++i)
      if (page.get()[i] != 0) return false;
    return true;
  };
  read_page(0);
  uint64_t generation = 0;
  std::memcpy(&generation, page.get() + 8, 8);
  KVC_CHECK(std::memcmp(page.get(), kFileMagic, 8) == 0, "'{}' is not a kvc cluster store (bad magic)", path);
  KVC_CHECK(generation == m.generation,
            "store '{}' is incomplete: it was rewritten by a later run that never committed (generation {} != {} in "
            "the index); rebuild it with kvc-cluster build",
            path, generation, m.generation);
  int64_t header_meta[4];
  std::memcpy(header_meta, page.get() + 16, sizeof header_meta);
  KVC_CHECK(header_meta[0] == kPageBytes && header_meta[1] == m.dim &&
                header_meta[2] == static_cast<int64_t>(m.key_type) &&
                header_meta[3] == static_cast<int64_t>(m.value_type) && zero_from(16 + sizeof header_meta),
            "store '{}' is corrupt: its header page is damaged; rebuild it with kvc-cluster build", path);
  struct stat st {};
  KVC_CHECK(::fstat(fd, &st) == 0, "store '{}': fstat failed: {}", path, std::strerror(errno));
  const int64_t file_bytes = static_cast<int64_t>(st.st_size);
  KVC_CHECK(
      file_bytes % kPageBytes == 0 && file_bytes / kPageBytes <= m.file_pages,
      "store '{}' is incomplete or corrupt: it holds {} bytes, not at most {} whole {}-byte pages as its index says",
      path, file_bytes, m.file_pages, kPageBytes);
  const int64_t present_pages = file_bytes / kPageBytes;

  const int64_t record_bytes = m.format().record_bytes();
  const int64_t per_page = (kPageBytes - kHeaderBytes) / record_bytes;
  // Pages the clusters hold; one past the file's end fails its read below.
  std::vector<bool> used(static_cast<size_t>(present_pages), false);
  used[0] = true;
  const auto claim = [&](int64_t index, int64_t uid) {
    const bool taken = index >= 1 && index < present_pages && used[static_cast<size_t>(index)];
    KVC_CHECK(index >= 1 && index < m.file_pages && !taken,
              "store '{}': the index is inconsistent (cluster {} claims page {}, outside the store or taken)", path,
              uid, index);
    if (index < present_pages) used[static_cast<size_t>(index)] = true;
  };
  // A whole page: magic, a record count that fits, CRC, and zeros after the last record.
  const auto well_formed = [&](const PageHeader& h) {
    return h.magic == kPageMagic && h.count <= static_cast<uint32_t>(per_page) &&
           h.crc == page_crc(page.get(), record_bytes) && zero_from(kHeaderBytes + h.count * record_bytes);
  };
  for (const ExtentRecord& r : m.extents) {
    KVC_CHECK(r.uid >= 0 && r.uid <= UINT32_MAX && r.full_pages >= 0 && r.full_pages < m.file_pages &&
                  (r.full_pages == 0 || (r.run_first_page >= 1 && r.run_first_page <= m.file_pages - r.full_pages)) &&
                  r.tail_count >= 0 && r.tail_count <= per_page,
              "store '{}': the index is inconsistent (cluster record {} is impossible)", path, r.uid);
    std::vector<uint32_t> crcs;
    const auto check = [&](int64_t index, int64_t count) {
      claim(index, r.uid);
      read_page(index);
      PageHeader h;
      std::memcpy(&h, page.get(), sizeof h);
      const bool ok = h.uid == static_cast<uint32_t>(r.uid) && h.count == count && well_formed(h);
      KVC_CHECK(ok, "store '{}' is torn: page {} of cluster {} fails its checksum; rebuild it with kvc-cluster build",
                path, index, r.uid);
      crcs.push_back(h.crc);
    };
    for (int64_t s = 0; s < r.full_pages; ++s) check(r.run_first_page + s, per_page);
    if (r.tail_count > 0) check(r.tail_page, r.tail_count);
    // Back clusters' pages are stored in reverse slot order: compare digests order-independently.
    uint64_t fwd = digest_of(crcs);
    if (fwd != r.digest) {
      std::vector<uint32_t> rev(crcs.rbegin() + (r.tail_count > 0 ? 1 : 0), crcs.rend());
      if (r.tail_count > 0) rev.push_back(crcs.back());
      KVC_CHECK(digest_of(rev) == r.digest,
                "store '{}' is incomplete: cluster {} differs from the committed index (overwritten after the commit)",
                path, r.uid);
    }
  }
  for (int64_t index = 1; index < present_pages; ++index) {
    if (used[static_cast<size_t>(index)]) continue;
    read_page(index);
    PageHeader h;
    std::memcpy(&h, page.get(), sizeof h);
    KVC_CHECK(zero_from(0) || well_formed(h),
              "store '{}' is corrupt: unused page {} is damaged (neither empty nor a whole page); rebuild it with "
              "kvc-cluster build",
              path, index);
  }
}

}  // namespace kvc::retrieval
