// PageStore reads: whole clusters coalesced into few sequential reads, the prefetcher's page images,
// and the file's sequential bandwidth.
#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "retrieval/page_format.h"
#include "retrieval/page_io.h"
#include "retrieval/page_store.h"
#include "util/clock.h"
#include "util/error.h"

namespace kvc::retrieval {

void PageStore::pread_pages(int64_t first_page, int64_t pages, uint8_t* buffer, bool for_update) {
  const auto t0 = SteadyClock::now();
  full_pread(fd_, buffer, pages * kPageBytes, first_page * kPageBytes, path_);
  if (!direct_) ::posix_fadvise(fd_, first_page * kPageBytes, pages * kPageBytes, POSIX_FADV_DONTNEED);
  if (for_update) {
    io_.update_read_bytes += pages * kPageBytes;
    return;
  }
  io_.read_seconds += seconds_since(t0);
  io_.read_bytes += pages * kPageBytes;
  io_.read_ops += 1;
  io_.read_run_max = std::max(io_.read_run_max, pages * kPageBytes);
}

std::vector<EntryBlock> PageStore::read(const std::vector<int64_t>& uids, int64_t gap_pages) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PageImage> images = read_locked(uids, gap_pages);
  std::vector<EntryBlock> out;
  out.reserve(uids.size());
  for (size_t i = 0; i < uids.size(); ++i) {
    images[i].records.append(extents_[uids[i]].tail);
    out.push_back(std::move(images[i].records));
  }
  return out;
}

std::vector<PageStore::PageImage> PageStore::read_pages(const std::vector<int64_t>& uids, int64_t gap_pages) {
  std::lock_guard<std::mutex> lock(mutex_);
  return read_locked(uids, gap_pages);
}

bool PageStore::complete(int64_t uid, const PageImage& image, EntryBlock* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!is_live(uid) || extents_[uid].version != image.version) return false;
  *out = image.records;
  out->append(extents_[uid].tail);
  return true;
}

std::vector<PageStore::PageImage> PageStore::read_locked(const std::vector<int64_t>& uids, int64_t gap_pages) {
  struct Run {
    int64_t first, pages;
  };
  std::vector<Run> runs;
  for (int64_t uid : uids) {
    KVC_CHECK(is_live(uid), "store: no cluster {}", uid);
    const Extent& e = extents_[uid];
    if (stored_pages(e) > 0) runs.push_back({run_first_page(e, stored_pages(e)), stored_pages(e)});
  }
  std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.first < b.first; });
  std::vector<Run> merged;
  for (const Run& r : runs) {
    if (!merged.empty() && r.first - (merged.back().first + merged.back().pages) <= gap_pages)
      merged.back().pages = std::max(merged.back().pages, r.first + r.pages - merged.back().first);
    else
      merged.push_back(r);
  }
  int64_t total = 0;
  for (const Run& r : merged) total += r.pages;
  auto buffer = aligned_bytes(std::max<int64_t>(total, 1) * kPageBytes);
  std::vector<std::pair<int64_t, int64_t>> where;  // (first page, offset in buffer)
  int64_t offset = 0;
  for (const Run& r : merged) {
    pread_pages(r.first, r.pages, buffer.get() + offset * kPageBytes, false);
    where.emplace_back(r.first, offset);
    offset += r.pages;
  }
  const auto buffer_page = [&](int64_t page) -> const uint8_t* {
    for (auto it = where.rbegin(); it != where.rend(); ++it)
      if (page >= it->first) return buffer.get() + (it->second + page - it->first) * kPageBytes;
    return nullptr;
  };
  std::vector<PageImage> out;
  out.reserve(uids.size());
  for (int64_t uid : uids) {
    const Extent& e = extents_[uid];
    EntryBlock block(dim_);
    for (int64_t s = 0; s < stored_pages(e); ++s) {
      const uint8_t* page = buffer_page(slot_page(e, s));
      const int64_t count = s < e.full_pages ? per_page() : e.flushed;
      PageHeader h;
      std::memcpy(&h, page, sizeof h);
      KVC_CHECK(h.magic == kPageMagic && h.uid == static_cast<uint32_t>(uid) && h.count == count &&
                    h.crc == page_crc(page, record_bytes()),
                "store '{}': page {} of cluster {} is torn or corrupt (checksum mismatch); rebuild the store", path_,
                slot_page(e, s), uid);
      read_page_records(page, count, format_, block);
    }
    out.push_back({std::move(block), e.version});
  }
  return out;
}

double PageStore::sequential_read_bandwidth(int64_t min_total_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t chunk_pages = 256;  // 1 MiB
  auto buffer = aligned_bytes(chunk_pages * kPageBytes);
  // Pools reserve pages they have not written yet: read what the file really holds.
  struct stat st {};
  KVC_CHECK(::fstat(fd_, &st) == 0, "store '{}': fstat failed: {}", path_, std::strerror(errno));
  const int64_t pages = static_cast<int64_t>(st.st_size) / kPageBytes;
  int64_t total = 0;
  const auto t0 = SteadyClock::now();
  while (total < min_total_bytes && pages > 0) {
    for (int64_t p = 0; p < pages; p += chunk_pages) {
      const int64_t n = std::min(chunk_pages, pages - p);
      full_pread(fd_, buffer.get(), n * kPageBytes, p * kPageBytes, path_);
      if (!direct_) ::posix_fadvise(fd_, p * kPageBytes, n * kPageBytes, POSIX_FADV_DONTNEED);
      total += n * kPageBytes;
    }
  }
  return static_cast<double>(total) / std::max(1e-9, seconds_since(t0));
}

}  // namespace kvc::retrieval
