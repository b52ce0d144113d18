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

void PageStore::pread_for_update(int64_t first_page, int64_t pages, uint8_t* buffer) {
  full_pread(fd_, buffer, pages * kPageBytes, first_page * kPageBytes, path_);
  if (!direct_) ::posix_fadvise(fd_, first_page * kPageBytes, pages * kPageBytes, POSIX_FADV_DONTNEED);
  io_.update_read_bytes += pages * kPageBytes;
}

std::vector<EntryBlock> PageStore::read(const std::vector<int64_t>& uids, int64_t gap_pages) {
  std::vector<EntryBlock> out(uids.size(), EntryBlock(dim_));
  std::vector<size_t> pending(uids.size());
  for (size_t i = 0; i < uids.size(); ++i) pending[i] = i;
  // Clusters rewritten while their pages were read are read again; after a few tries the read holds the
  // mutex throughout, so a busy writer cannot starve it.
  for (int attempt = 0; !pending.empty(); ++attempt) {
    std::vector<int64_t> batch;
    for (size_t i : pending) batch.push_back(uids[i]);
    std::unique_lock<std::mutex> lock(mutex_);
    FetchedPages fetched;
    std::vector<bool> unchanged;
    const ReadPlan plan = fetch_outside_lock(lock, batch, gap_pages, attempt >= 2, &fetched, &unchanged);
    std::vector<size_t> changed;
    std::vector<std::pair<size_t, EntryBlock>> tails;  // (cluster in plan, its write buffer now)
    for (size_t c = 0; c < plan.clusters.size(); ++c) {
      const int64_t uid = plan.clusters[c].uid;
      KVC_CHECK(is_live(uid), "store: cluster {} was dropped while it was read", uid);
      if (unchanged[c]) tails.emplace_back(c, extents_[uid].tail);
      else changed.push_back(pending[c]);
    }
    lock.unlock();
    for (auto& [c, tail] : tails) {
      EntryBlock& block = out[pending[c]];
      block = decode(plan.clusters[c], fetched);
      block.append(tail);
    }
    pending = std::move(changed);
  }
  return out;
}

std::vector<PageStore::PageImage> PageStore::read_pages(const std::vector<int64_t>& uids, int64_t gap_pages) {
  std::unique_lock<std::mutex> lock(mutex_);
  FetchedPages fetched;
  std::vector<bool> current;
  const ReadPlan plan = fetch_outside_lock(lock, uids, gap_pages, false, &fetched, &current);
  lock.unlock();
  // A cluster that changed during the read keeps version 0, which no cluster ever has: complete()
  // refuses it and the decode step reads the cluster itself.
  std::vector<PageImage> out;
  out.reserve(plan.clusters.size());
  for (size_t c = 0; c < plan.clusters.size(); ++c) {
    if (current[c]) out.push_back({decode(plan.clusters[c], fetched), plan.clusters[c].version});
    else out.push_back({EntryBlock(dim_), 0});
  }
  return out;
}

bool PageStore::complete(int64_t uid, const PageImage& image, EntryBlock* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!is_live(uid) || extents_[uid].version != image.version) return false;
  *out = image.records;
  out->append(extents_[uid].tail);
  return true;
}

PageStore::ReadPlan PageStore::plan_read(const std::vector<int64_t>& uids, int64_t gap_pages) const {
  ReadPlan plan;
  std::vector<ReadPlan::Run> runs;
  for (int64_t uid : uids) {
    KVC_CHECK(is_live(uid), "store: no cluster {}", uid);
    const Extent& e = extents_[uid];
    ReadPlan::Cluster c;
    c.uid = uid;
    c.version = e.version;
    for (int64_t s = 0; s < stored_pages(e); ++s) c.pages.push_back(slot_page(e, s));
    c.last_count = e.flushed > 0 ? e.flushed : per_page();
    if (stored_pages(e) > 0) runs.push_back({run_first_page(e, stored_pages(e)), stored_pages(e)});
    plan.clusters.push_back(std::move(c));
  }
  std::sort(runs.begin(), runs.end(), [](const ReadPlan::Run& a, const ReadPlan::Run& b) { return a.first < b.first; });
  for (const ReadPlan::Run& r : runs) {
    ReadPlan::Run* last = plan.runs.empty() ? nullptr : &plan.runs.back();
    if (last && r.first - (last->first + last->pages) <= gap_pages)
      last->pages = std::max(last->pages, r.first + r.pages - last->first);
    else plan.runs.push_back(r);
  }
  return plan;
}

PageStore::ReadPlan PageStore::fetch_outside_lock(std::unique_lock<std::mutex>& lock, const std::vector<int64_t>& uids,
                                                  int64_t gap_pages, bool hold, FetchedPages* fetched,
                                                  std::vector<bool>* unchanged) {
  ReadPlan plan = plan_read(uids, gap_pages);
  if (!hold) lock.unlock();
  *fetched = fetch(plan);
  if (!hold) lock.lock();
  count_reads(fetched->io);
  unchanged->assign(plan.clusters.size(), false);
  for (size_t c = 0; c < plan.clusters.size(); ++c) {
    const int64_t uid = plan.clusters[c].uid;
    (*unchanged)[c] = is_live(uid) && extents_[uid].version == plan.clusters[c].version;
  }
  return plan;
}

PageStore::FetchedPages PageStore::fetch(const ReadPlan& plan) const {
  int64_t total = 0;
  for (const ReadPlan::Run& r : plan.runs) total += r.pages;
  FetchedPages f{aligned_bytes(std::max<int64_t>(total, 1) * kPageBytes), {}, {}};
  int64_t offset = 0;
  for (const ReadPlan::Run& r : plan.runs) {
    const auto t0 = SteadyClock::now();
    full_pread(fd_, f.buffer.get() + offset * kPageBytes, r.pages * kPageBytes, r.first * kPageBytes, path_);
    if (!direct_) ::posix_fadvise(fd_, r.first * kPageBytes, r.pages * kPageBytes, POSIX_FADV_DONTNEED);
    f.io.read_seconds += seconds_since(t0);
    f.io.read_bytes += r.pages * kPageBytes;
    f.io.read_ops += 1;
    f.io.read_run_max = std::max(f.io.read_run_max, r.pages * kPageBytes);
    f.where.emplace_back(r.first, offset);
    offset += r.pages;
  }
  return f;
}

void PageStore::count_reads(const IoCounters& io) {
  io_.read_seconds += io.read_seconds;
  io_.read_bytes += io.read_bytes;
  io_.read_ops += io.read_ops;
  io_.read_run_max = std::max(io_.read_run_max, io.read_run_max);
}

EntryBlock PageStore::decode(const ReadPlan::Cluster& cluster, const FetchedPages& fetched) const {
  const auto buffer_page = [&](int64_t page) -> const uint8_t* {
    for (auto it = fetched.where.rbegin(); it != fetched.where.rend(); ++it)
      if (page >= it->first) return fetched.buffer.get() + (it->second + page - it->first) * kPageBytes;
    return nullptr;
  };
  EntryBlock block(dim_);
  const int64_t n = static_cast<int64_t>(cluster.pages.size());
  for (int64_t s = 0; s < n; ++s) {
    const uint8_t* page = buffer_page(cluster.pages[s]);
    const int64_t count = s + 1 < n ? per_page() : cluster.last_count;
    check_page(page, cluster.pages[s], cluster.uid, count);
    read_page_records(page, count, format_, block);
  }
  return block;
}

void PageStore::check_page(const uint8_t* page, int64_t page_number, int64_t uid, int64_t count) const {
  PageHeader h;
  std::memcpy(&h, page, sizeof h);
  KVC_CHECK(h.magic == kPageMagic && h.uid == static_cast<uint32_t>(uid) && h.count == count &&
                h.crc == page_crc(page, record_bytes()),
            "store '{}': page {} of cluster {} is torn or corrupt (checksum mismatch); rebuild the store", path_,
            page_number, uid);
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
