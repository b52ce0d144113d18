#include "retrieval/page_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "util/error.h"

namespace kvc::retrieval {
namespace {

constexpr uint32_t kPageMagic = 0x4B565047;          // "GPVK"
constexpr char kFileMagic[8] = {'K', 'V', 'C', 'S', 'T', 'O', 'R', '1'};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};
std::unique_ptr<uint8_t, AlignedFree> aligned_bytes(int64_t n) {
  void* p = nullptr;
  if (posix_memalign(&p, PageStore::kPageBytes, static_cast<size_t>(std::max<int64_t>(n, PageStore::kPageBytes))) != 0)
    fail("out of memory for a {}-byte I/O buffer", n);
  std::memset(p, 0, static_cast<size_t>(n));
  return std::unique_ptr<uint8_t, AlignedFree>(static_cast<uint8_t*>(p));
}

uint64_t digest_of(const std::vector<uint32_t>& crcs) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint32_t c : crcs) h = (h ^ c) * 0x100000001b3ULL;
  return h;
}

struct PageHeader {
  uint32_t magic, uid, count, crc;
};

// CRC over (uid, count, records) so a page moved to the wrong cluster also fails.
uint32_t page_crc(const uint8_t* page, int64_t record_bytes) {
  PageHeader h;
  std::memcpy(&h, page, sizeof h);
  uint32_t c = crc32(&h.uid, 8);
  return crc32(page + PageStore::kHeaderBytes, static_cast<size_t>(h.count * record_bytes), c);
}

void full_pread(int fd, uint8_t* buffer, int64_t bytes, int64_t offset, const std::string& path) {
  int64_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, buffer + done, static_cast<size_t>(bytes - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    KVC_CHECK(n > 0, "store '{}': read of {} bytes at offset {} failed ({}): the file is truncated or unreadable",
              path, bytes, offset + done, n < 0 ? std::strerror(errno) : "end of file");
    done += n;
  }
}

}  // namespace

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

IoCounters IoCounters::minus(const IoCounters& o) const {
  IoCounters r = *this;
  r.read_bytes -= o.read_bytes;
  r.read_ops -= o.read_ops;
  r.written_bytes -= o.written_bytes;
  r.write_ops -= o.write_ops;
  r.moved_bytes -= o.moved_bytes;
  r.update_read_bytes -= o.update_read_bytes;
  r.read_seconds -= o.read_seconds;
  r.write_seconds -= o.write_seconds;
  return r;  // read_run_max stays the running maximum
}

PageStore::PageStore(const std::string& path, int64_t dim, Layout layout, bool direct_io)
    : path_(path), dim_(dim), layout_(layout) {
  KVC_CHECK(dim > 0 && per_page() >= 1, "store: head_dim {} is too large for {}-byte pages", dim, kPageBytes);
  if (direct_io) {
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0644);
    direct_ = fd_ >= 0;
  }
  if (fd_ < 0) fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  KVC_CHECK(fd_ >= 0, "cannot create store file '{}': {}", path, std::strerror(errno));
  page_buffer_ = static_cast<uint8_t*>(aligned_bytes(kPageBytes).release());
  if (const char* crash = std::getenv("KVC_STORE_CRASH_AFTER_PAGES")) crash_after_pages_ = std::atoll(crash);
  generation_ = (static_cast<uint64_t>(Clock::now().time_since_epoch().count()) << 16) ^ static_cast<uint64_t>(::getpid());
  // File header: magic, generation, page size, head_dim. A rebuilt store gets a new generation, so
  // an index committed for an earlier build never matches it.
  std::memset(page_buffer_, 0, kPageBytes);
  std::memcpy(page_buffer_, kFileMagic, 8);
  std::memcpy(page_buffer_ + 8, &generation_, 8);
  const int64_t meta[2] = {kPageBytes, dim_};
  std::memcpy(page_buffer_ + 16, meta, sizeof meta);
  if (::pwrite(fd_, page_buffer_, kPageBytes, 0) != kPageBytes) {
    // A throwing constructor runs no destructor: release here, and leave no empty store behind.
    const int error_number = errno;
    ::close(fd_);
    std::free(page_buffer_);
    ::unlink(path.c_str());
    fail("cannot write store file '{}': {}", path, std::strerror(error_number));
  }
}

PageStore::~PageStore() {
  if (fd_ >= 0) ::close(fd_);
  std::free(page_buffer_);
}

int64_t PageStore::slot_page(const Extent& e, int64_t slot) const {
  const Pool& p = pools_[e.pool];
  return e.back ? p.first_page + p.capacity - 1 - slot : p.first_page + slot;
}

int64_t PageStore::free_slots(const Pool& p) const {
  int64_t used = 0;
  if (p.front >= 0) used += slots(extents_[p.front]);
  if (p.back >= 0) used += slots(extents_[p.back]);
  return p.capacity - used;
}

int64_t PageStore::new_pool(int64_t capacity) {
  pools_.push_back(Pool{next_page_, capacity, -1, -1});
  next_page_ += capacity;
  return static_cast<int64_t>(pools_.size()) - 1;
}

// Chooses where a cluster needing `pages_needed` slots goes; fills e.pool / e.back.
void PageStore::place(int64_t uid, int64_t pages_needed, int64_t partner) {
  Extent& e = extents_[uid];
  if (layout_ == Layout::kNaive) {
    e.pool = new_pool(pages_needed);
    e.back = false;
    pools_[e.pool].front = uid;
    return;
  }
  const auto try_back = [&](int64_t pool) {
    if (pool < 0) return false;
    Pool& p = pools_[pool];
    if (p.back >= 0 || p.front < 0 || free_slots(p) < pages_needed + 1) return false;  // leave the front room to grow
    p.back = uid;
    e.pool = pool;
    e.back = true;
    return true;
  };
  if (partner >= 0 && try_back(extents_[partner].pool)) return;
  if (partner < 0 && try_back(open_pool_)) return;
  e.pool = new_pool(std::max(pool_pages_, 2 * pages_needed));
  e.back = false;
  pools_[e.pool].front = uid;
  open_pool_ = e.pool;
}

void PageStore::write_page(int64_t page, int64_t uid, const EntryBlock& block, int64_t begin, int64_t count,
                           uint32_t* crc_out) {
  std::memset(page_buffer_, 0, kPageBytes);
  uint8_t* rec = page_buffer_ + kHeaderBytes;
  const size_t row = static_cast<size_t>(dim_) * 4;
  for (int64_t i = begin; i < begin + count; ++i) {
    std::memcpy(rec, block.key(i), row);
    std::memcpy(rec + row, block.value(i), row);
    std::memcpy(rec + 2 * row, &block.positions[i], 8);
    rec += record_bytes();
  }
  PageHeader h{kPageMagic, static_cast<uint32_t>(uid), static_cast<uint32_t>(count), 0};
  std::memcpy(page_buffer_, &h, sizeof h);
  h.crc = page_crc(page_buffer_, record_bytes());
  std::memcpy(page_buffer_, &h, sizeof h);
  if (crc_out) *crc_out = h.crc;
  const auto t0 = Clock::now();
  // Test hook for crash safety: die half-way through a page write, as a power cut or kill -9 would.
  if (crash_after_pages_ >= 0 && pages_written_ >= crash_after_pages_) {
    (void)!::pwrite(fd_, page_buffer_, kPageBytes / 2, page * kPageBytes);
    ::raise(SIGKILL);
  }
  KVC_CHECK(::pwrite(fd_, page_buffer_, kPageBytes, page * kPageBytes) == kPageBytes,
            "store '{}': page write failed: {}", path_, std::strerror(errno));
  pages_written_ += 1;
  io_.write_seconds += seconds_since(t0);
  io_.written_bytes += kPageBytes;
  io_.write_ops += 1;
}

// Writes `records` as the cluster's full pages + RAM tail, from slot 0.
void PageStore::write_records(int64_t uid, const EntryBlock& records) {
  Extent& e = extents_[uid];
  const int64_t pp = per_page();
  e.version = next_version_++;
  e.full_pages = records.size() / pp;
  e.page_crc.assign(static_cast<size_t>(e.full_pages), 0);
  for (int64_t s = 0; s < e.full_pages; ++s) write_page(slot_page(e, s), uid, records, s * pp, pp, &e.page_crc[s]);
  e.tail = EntryBlock(dim_);
  for (int64_t i = e.full_pages * pp; i < records.size(); ++i) e.tail.push_from(records, i);
}

int64_t PageStore::create(const EntryBlock& records, int64_t partner) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t uid = static_cast<int64_t>(extents_.size());
  extents_.emplace_back();
  extents_[uid].live = true;
  extents_[uid].tail = EntryBlock(dim_);
  place(uid, std::max<int64_t>(1, (records.size() + per_page() - 1) / per_page()), partner);
  write_records(uid, records);
  return uid;
}

bool PageStore::contains(int64_t uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return is_live(uid);
}

bool PageStore::is_live(int64_t uid) const {
  return uid >= 0 && uid < static_cast<int64_t>(extents_.size()) && extents_[uid].live;
}

int64_t PageStore::entries(int64_t uid) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const Extent& e = extents_.at(static_cast<size_t>(uid));
  return e.full_pages * per_page() + e.tail.size();
}

void PageStore::pread_pages(int64_t first_page, int64_t pages, uint8_t* buffer, bool for_update) {
  const auto t0 = Clock::now();
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

void PageStore::relocate(int64_t uid, int64_t pages_needed) {
  Extent& e = extents_[uid];
  // Read the full pages back, free the old place, write them at the new one.
  auto buffer = aligned_bytes(std::max<int64_t>(1, e.full_pages) * kPageBytes);
  EntryBlock records(dim_);
  if (e.full_pages > 0) {
    const int64_t first = e.back ? slot_page(e, e.full_pages - 1) : slot_page(e, 0);
    pread_pages(first, e.full_pages, buffer.get(), true);
    for (int64_t s = 0; s < e.full_pages; ++s) {
      const uint8_t* page = buffer.get() + (slot_page(e, s) - first) * kPageBytes;
      const uint8_t* rec = page + kHeaderBytes;
      for (int64_t i = 0; i < per_page(); ++i, rec += record_bytes()) {
        int64_t pos;
        std::memcpy(&pos, rec + 8 * dim_, 8);
        records.push(reinterpret_cast<const float*>(rec), reinterpret_cast<const float*>(rec + 4 * dim_), pos);
      }
    }
  }
  records.append(e.tail);
  Pool& old = pools_[e.pool];
  (e.back ? old.back : old.front) = -1;
  io_.moved_bytes += e.full_pages * kPageBytes;
  place(uid, pages_needed, -1);
  write_records(uid, records);
}

void PageStore::append(int64_t uid, const float* key, const float* value, int64_t position) {
  std::lock_guard<std::mutex> lock(mutex_);
  KVC_CHECK(is_live(uid), "store: no cluster {}", uid);
  Extent& e = extents_[uid];
  const bool new_page = e.tail.empty();
  e.tail.push(key, value, position);
  // A new tail page needs a slot: with none left the cluster moves (naive: every time it grows).
  if (new_page && free_slots(pools_[e.pool]) < 0) relocate(uid, slots(e));
  if (e.tail.size() < per_page()) return;
  // The write buffer holds a whole page: it goes out in one aligned write.
  e.page_crc.push_back(0);
  write_page(slot_page(e, e.full_pages), uid, e.tail, 0, per_page(), &e.page_crc.back());
  e.full_pages += 1;
  e.version = next_version_++;
  e.tail.clear();
}

void PageStore::rewrite(int64_t uid, const EntryBlock& records) {
  std::lock_guard<std::mutex> lock(mutex_);
  KVC_CHECK(is_live(uid), "store: no cluster {}", uid);
  Extent& e = extents_[uid];
  const int64_t needed = std::max<int64_t>(1, (records.size() + per_page() - 1) / per_page());
  if (needed > slots(e) + free_slots(pools_[e.pool])) {
    Pool& old = pools_[e.pool];
    (e.back ? old.back : old.front) = -1;
    io_.moved_bytes += records.size() * record_bytes();
    place(uid, needed, -1);
  }
  write_records(uid, records);
}

void PageStore::drop(int64_t uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  KVC_CHECK(is_live(uid), "store: no cluster {}", uid);
  Extent& e = extents_[uid];
  Pool& p = pools_[e.pool];
  (e.back ? p.back : p.front) = -1;
  e = Extent{};
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
    if (e.full_pages > 0) runs.push_back({e.back ? slot_page(e, e.full_pages - 1) : slot_page(e, 0), e.full_pages});
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
    for (int64_t s = 0; s < e.full_pages; ++s) {
      const uint8_t* page = buffer_page(slot_page(e, s));
      PageHeader h;
      std::memcpy(&h, page, sizeof h);
      KVC_CHECK(h.magic == kPageMagic && h.uid == static_cast<uint32_t>(uid) && h.count == per_page() &&
                    h.crc == page_crc(page, record_bytes()),
                "store '{}': page {} of cluster {} is torn or corrupt (checksum mismatch); rebuild the store", path_,
                slot_page(e, s), uid);
      const uint8_t* rec = page + kHeaderBytes;
      for (int64_t i = 0; i < per_page(); ++i, rec += record_bytes()) {
        int64_t pos;
        std::memcpy(&pos, rec + 8 * dim_, 8);
        block.push(reinterpret_cast<const float*>(rec), reinterpret_cast<const float*>(rec + 4 * dim_), pos);
      }
    }
    out.push_back({std::move(block), e.version});
  }
  return out;
}

StoreManifest PageStore::commit() {
  std::lock_guard<std::mutex> lock(mutex_);
  StoreManifest m;
  m.generation = generation_;
  m.dim = dim_;
  m.page_bytes = kPageBytes;
  m.file_pages = next_page_;
  for (int64_t uid = 0; uid < static_cast<int64_t>(extents_.size()); ++uid) {
    Extent& e = extents_[uid];
    if (!e.live) continue;
    ExtentRecord r;
    r.uid = uid;
    r.full_pages = e.full_pages;
    r.run_first_page = e.full_pages > 0 ? (e.back ? slot_page(e, e.full_pages - 1) : slot_page(e, 0)) : -1;
    std::vector<uint32_t> crcs = e.page_crc;
    if (!e.tail.empty()) {  // the partial tail page is written as is; appends later rewrite it whole
      uint32_t crc = 0;
      r.tail_page = slot_page(e, e.full_pages);
      r.tail_count = e.tail.size();
      write_page(r.tail_page, uid, e.tail, 0, e.tail.size(), &crc);
      crcs.push_back(crc);
    }
    r.digest = digest_of(crcs);
    m.extents.push_back(r);
  }
  KVC_CHECK(::fdatasync(fd_) == 0, "store '{}': fdatasync failed: {}", path_, std::strerror(errno));
  return m;
}

// Every byte of the file is accounted for, so no flip passes unseen:
//  - page 0 (header): magic, generation, page size and head_dim as the index says; the rest zero.
//  - pages of committed clusters: magic, cluster, record count and CRC over (cluster, count, records);
//    the bytes after the last record are zero (write_page clears them); the digest ties the pages to
//    the index.
//  - every other page below file_pages (a pool's unused slots, pages a dropped or moved cluster left):
//    no read ever touches them, yet each must still be all zero or a whole, checksummed page, so damage
//    there is reported too. Pages past the end of the file are reserved but never written.
//  - nothing beyond file_pages, and only whole pages.
void PageStore::verify(const std::string& path, const StoreManifest& m) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  KVC_CHECK(fd >= 0, "store '{}' is missing: {}", path, std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  KVC_CHECK(m.page_bytes == kPageBytes && m.dim > 0 && m.dim <= (kPageBytes - kHeaderBytes - 8) / 8 &&
                m.file_pages >= 1,
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
  int64_t header_meta[2];
  std::memcpy(header_meta, page.get() + 16, sizeof header_meta);
  KVC_CHECK(header_meta[0] == kPageBytes && header_meta[1] == m.dim && zero_from(16 + sizeof header_meta),
            "store '{}' is corrupt: its header page is damaged; rebuild it with kvc-cluster build", path);
  struct stat st {};
  KVC_CHECK(::fstat(fd, &st) == 0, "store '{}': fstat failed: {}", path, std::strerror(errno));
  const int64_t file_bytes = static_cast<int64_t>(st.st_size);
  KVC_CHECK(file_bytes % kPageBytes == 0 && file_bytes / kPageBytes <= m.file_pages,
            "store '{}' is incomplete or corrupt: it holds {} bytes, not at most {} whole {}-byte pages as its index says",
            path, file_bytes, m.file_pages, kPageBytes);
  const int64_t present_pages = file_bytes / kPageBytes;

  const int64_t record_bytes = 8 * m.dim + 8;
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

double PageStore::sequential_read_bandwidth(int64_t min_total_bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  const int64_t chunk_pages = 256;  // 1 MiB
  auto buffer = aligned_bytes(chunk_pages * kPageBytes);
  // Pools reserve pages they have not written yet: read what the file really holds.
  struct stat st {};
  KVC_CHECK(::fstat(fd_, &st) == 0, "store '{}': fstat failed: {}", path_, std::strerror(errno));
  const int64_t pages = static_cast<int64_t>(st.st_size) / kPageBytes;
  int64_t total = 0;
  const auto t0 = Clock::now();
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
