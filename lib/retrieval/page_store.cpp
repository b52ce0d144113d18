// PageStore: the layout of clusters in pools and every write (creation, appends, rewrites, moves, commit).
// Reads are in page_store_read.cpp, the check of a committed file in page_store_verify.cpp.
#include "retrieval/page_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "retrieval/page_format.h"
#include "retrieval/page_io.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/files.h"
#include "util/run_files.h"

namespace kvc::retrieval {

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

PageStore::PageStore(const std::string& path, RecordFormat format, Layout layout, bool direct_io)
    : path_(path), format_(format), dim_(format.dim), layout_(layout) {
  KVC_CHECK((!is_block_record(format.keys) && !is_block_record(format.values)) || dim_ % 32 == 0,
            "store: q8_0/q4_0 records need a head_dim that is a multiple of 32, got {}", dim_);
  KVC_CHECK(dim_ > 0 && per_page() >= 1, "store: head_dim {} is too large for {}-byte pages", dim_, kPageBytes);
  // The store is built in a file of its own beside `path` and renamed over it once whole (publish()):
  // an existing file there is replaced only by a complete store, never truncated or unlinked.
  struct stat existing {};
  if (::stat(path.c_str(), &existing) == 0)
    KVC_CHECK(S_ISREG(existing.st_mode),
              "store '{}' is not a regular file (a device, FIFO or folder); give a file path", path);
  check_output_is_not_an_input(path);
  remove_stale_temps_beside(path);
  const std::string temp = temp_path_beside(path);
  if (direct_io) {
    fd_ = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0644);
    direct_ = fd_ >= 0;
  }
  if (fd_ < 0) fd_ = ::open(temp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  KVC_CHECK(fd_ >= 0, "cannot create store file '{}': {}", path, std::strerror(errno));
  temp_path_ = temp;
  page_buffer_ = static_cast<uint8_t*>(aligned_bytes(kPageBytes).release());
  if (const char* crash = std::getenv("KVC_STORE_CRASH_AFTER_PAGES")) crash_after_pages_ = std::atoll(crash);
  generation_ =
      (static_cast<uint64_t>(SteadyClock::now().time_since_epoch().count()) << 16) ^ static_cast<uint64_t>(::getpid());
  // File header: magic, generation, page size, head_dim, key and value record types. A rebuilt store
  // gets a new generation, so an index committed for an earlier build never matches it.
  std::memset(page_buffer_, 0, kPageBytes);
  std::memcpy(page_buffer_, kFileMagic, 8);
  std::memcpy(page_buffer_ + 8, &generation_, 8);
  const int64_t meta[4] = {kPageBytes, dim_, static_cast<int64_t>(format.keys), static_cast<int64_t>(format.values)};
  std::memcpy(page_buffer_ + 16, meta, sizeof meta);
  if (::pwrite(fd_, page_buffer_, kPageBytes, 0) != kPageBytes) {
    // A throwing constructor runs no destructor: release here, and leave no empty store behind.
    const int error_number = errno;
    ::close(fd_);
    std::free(page_buffer_);
    ::unlink(temp_path_.c_str());  // the file this constructor made, never `path`
    fail("cannot write store file '{}': {}", path, std::strerror(error_number));
  }
}

PageStore::~PageStore() {
  if (fd_ >= 0) ::close(fd_);
  std::free(page_buffer_);
  if (!temp_path_.empty()) ::unlink(temp_path_.c_str());  // never published: nothing of it is left
}

void PageStore::publish() {
  std::lock_guard<std::mutex> lock(mutex_);
  publish_locked();
}

void PageStore::publish_locked() {
  KVC_CHECK(::fdatasync(fd_) == 0, "store '{}': fdatasync failed: {}", path_, std::strerror(errno));
  if (temp_path_.empty()) return;
  KVC_CHECK(::rename(temp_path_.c_str(), path_.c_str()) == 0, "cannot write store file '{}': {}", path_,
            std::strerror(errno));
  temp_path_.clear();
  const size_t slash = path_.find_last_of('/');
  const std::string folder = slash == std::string::npos ? "." : (slash == 0 ? "/" : path_.substr(0, slash));
  const int dir_fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    (void)::fsync(dir_fd);
    ::close(dir_fd);
  }
}

int64_t PageStore::slot_page(const Extent& e, int64_t slot) const {
  const Pool& p = pools_[e.pool];
  return e.back ? p.first_page + p.capacity - 1 - slot : p.first_page + slot;
}

int64_t PageStore::run_first_page(const Extent& e, int64_t pages) const {
  return e.back ? slot_page(e, pages - 1) : slot_page(e, 0);
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
  encode_records(page_buffer_ + kHeaderBytes, format_, block, begin, count);
  PageHeader h{kPageMagic, static_cast<uint32_t>(uid), static_cast<uint32_t>(count), 0};
  std::memcpy(page_buffer_, &h, sizeof h);
  h.crc = page_crc(page_buffer_, record_bytes());
  std::memcpy(page_buffer_, &h, sizeof h);
  if (crc_out) *crc_out = h.crc;
  const auto t0 = SteadyClock::now();
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

// Writes `records` from slot 0: full pages, then the rest as a partial last page (or into the RAM
// write buffer, as the tail placement says).
void PageStore::write_records(int64_t uid, const EntryBlock& records) {
  Extent& e = extents_[uid];
  const int64_t pp = per_page();
  e.version = next_version_++;
  e.full_pages = records.size() / pp;
  e.page_crc.assign(static_cast<size_t>(e.full_pages), 0);
  for (int64_t s = 0; s < e.full_pages; ++s) write_page(slot_page(e, s), uid, records, s * pp, pp, &e.page_crc[s]);
  e.tail = EntryBlock(dim_);
  e.flushed = 0;
  const int64_t rest = records.size() - e.full_pages * pp;
  if (rest == 0) return;
  const bool small = e.full_pages == 0 && records.size() <= kSmallClusterEntries;
  if (tail_placement_ == TailPlacement::kRam || (tail_placement_ == TailPlacement::kSmallInRam && small)) {
    for (int64_t i = e.full_pages * pp; i < records.size(); ++i) e.tail.push_from(records, i);
    round_through_storage(format_, e.tail);
    return;
  }
  e.flushed = rest;
  write_page(slot_page(e, e.full_pages), uid, records, e.full_pages * pp, rest, &e.flushed_crc);
}

void PageStore::load_flushed(int64_t uid) {
  Extent& e = extents_[uid];
  if (e.flushed == 0) return;
  auto buffer = aligned_bytes(kPageBytes);
  const int64_t page = slot_page(e, e.full_pages);
  pread_for_update(page, 1, buffer.get());
  check_page(buffer.get(), page, uid, e.flushed);
  read_page_records(buffer.get(), e.flushed, format_, e.tail);
  e.flushed = 0;
  e.version = next_version_++;  // the records move from the page image to the RAM buffer
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
  return e.full_pages * per_page() + e.tail.size() + e.flushed;
}

int64_t PageStore::tail_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t records = 0;
  for (const Extent& e : extents_)
    if (e.live) records += e.tail.size();
  return records * RecordFormat{dim_}.record_bytes();
}

void PageStore::relocate(int64_t uid, int64_t pages_needed) {
  Extent& e = extents_[uid];
  // Read the pages back, free the old place, write them at the new one.
  load_flushed(uid);
  auto buffer = aligned_bytes(std::max<int64_t>(1, e.full_pages) * kPageBytes);
  EntryBlock records(dim_);
  if (e.full_pages > 0) {
    const int64_t first = run_first_page(e, e.full_pages);
    pread_for_update(first, e.full_pages, buffer.get());
    for (int64_t s = 0; s < e.full_pages; ++s) {
      read_page_records(buffer.get() + (slot_page(e, s) - first) * kPageBytes, per_page(), format_, records);
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
  load_flushed(uid);
  Extent& e = extents_[uid];
  const bool new_page = e.tail.empty();
  e.tail.push(key, value, position);
  round_through_storage(format_, e.tail, e.tail.size() - 1);
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

StoreManifest PageStore::commit(bool publish) {
  std::lock_guard<std::mutex> lock(mutex_);
  StoreManifest m;
  m.generation = generation_;
  m.dim = dim_;
  m.key_type = format_.keys;
  m.value_type = format_.values;
  m.page_bytes = kPageBytes;
  m.file_pages = next_page_;
  for (int64_t uid = 0; uid < static_cast<int64_t>(extents_.size()); ++uid) {
    Extent& e = extents_[uid];
    if (!e.live) continue;
    ExtentRecord r;
    r.uid = uid;
    r.full_pages = e.full_pages;
    r.run_first_page = e.full_pages > 0 ? run_first_page(e, e.full_pages) : -1;
    std::vector<uint32_t> crcs = e.page_crc;
    if (!e.tail.empty()) {  // the write buffer goes out as the partial last page and leaves RAM
      write_page(slot_page(e, e.full_pages), uid, e.tail, 0, e.tail.size(), &e.flushed_crc);
      e.flushed = e.tail.size();
      e.tail.clear();
      e.version = next_version_++;
    }
    if (e.flushed > 0) {
      r.tail_page = slot_page(e, e.full_pages);
      r.tail_count = e.flushed;
      crcs.push_back(e.flushed_crc);
    }
    r.digest = digest_of(crcs);
    m.extents.push_back(r);
  }
  if (publish) publish_locked();
  return m;
}

}  // namespace kvc::retrieval
