#pragma once
// The on-storage half of the clustered cache: one file of 4 KiB pages. Each page belongs to one
// cluster and holds whole records (rotated key, value, position) behind a header with the cluster
// id, record count and a CRC32, so a torn or foreign page is always detected on read.
//
// Layout. Clusters live in pools of contiguous pages, so a cluster is one sequential read.
//  - dual-head: two clusters share a pool, one growing up from its start, one down from its end,
//    so appends move no data until they meet; then the grower moves to a new pool.
//  - naive: each cluster sits in an extent of exactly its size; growing by a page moves it to the
//    end of the file (the contiguous baseline the dual-head pools are measured against).
// A cluster written whole (created, rewritten, moved) ends in a partial page on storage, so the
// prompt's clusters hold no RAM. Appends gather in a RAM write buffer (the cluster's tail page) that
// reaches storage as a whole page once full; the first append to a cluster whose last page is partial
// on storage reads that page back into the buffer (one page read, counted as a read for updates). The
// buffers thus hold at most the entries added since the cluster was last written whole
// (set_tail_placement can keep the unfilled last page in RAM instead, of every cluster or of clusters
// of one or two entries).
//
// I/O is pread/pwrite on page-aligned buffers with O_DIRECT when the file system allows it, else
// buffered with posix_fadvise(DONTNEED) after each read, so measured reads hit the device, not RAM.
//
// Crash safety: commit() writes the RAM write buffers out as partial pages, fdatasyncs, and returns a
// manifest (page runs and a digest of page CRCs per cluster) that the caller stores atomically in the
// index file: the commit record. verify() re-reads a committed store against its manifest and throws on any torn page,
// generation mismatch (a later, interrupted run rewrote the file) or missing data.
// Thread-safe: each public operation holds the store's mutex, except while reads wait on storage: a
// read notes where its clusters' pages are and their versions under the mutex, reads the pages without
// it (so the decode thread's appends never wait on the I/O thread's prefetch), and keeps a cluster's
// pages only if its version did not change meanwhile (else read() reads it again; a prefetch drops it).
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "retrieval/entry_block.h"
#include "retrieval/page_format.h"
#include "retrieval/page_io.h"

namespace kvc::retrieval {

enum class Layout { kDualHead, kNaive };

// Where a cluster written whole keeps its unfilled last page: on storage (no RAM), in RAM (no read
// for it, but RAM for every cluster's last page), or in RAM only for the smallest clusters, of one or
// two entries within one page. Inner-product scoring picks those most (their centroid is a whole key,
// or nearly), and on storage each would cost a read of its own; a larger cluster's last page comes in
// the same read as its full pages. Counted in entries, not bytes: at a small head size a page holds
// dozens of records, and keeping every cluster under a page in RAM would hold most of the cache there.
enum class TailPlacement { kStorage, kRam, kSmallInRam };
inline constexpr int64_t kSmallClusterEntries = 2;

struct IoCounters {
  int64_t read_bytes = 0, read_ops = 0, read_run_max = 0;  // retrieval reads (after coalescing)
  int64_t written_bytes = 0, write_ops = 0;                // all page writes
  int64_t moved_bytes = 0;                                 // bytes relocated because a cluster had no room
  int64_t update_read_bytes = 0;                           // reads made for updates (relocation)
  double read_seconds = 0, write_seconds = 0;
  IoCounters minus(const IoCounters& o) const;
};

struct ExtentRecord {
  int64_t uid = 0, run_first_page = 0, full_pages = 0, tail_page = -1, tail_count = 0;
  uint64_t digest = 0;
};

struct StoreManifest {
  uint64_t generation = 0;
  int64_t dim = 0, page_bytes = 0, file_pages = 0;
  RecordType key_type = RecordType::kF32, value_type = RecordType::kF32;
  std::vector<ExtentRecord> extents;
  RecordFormat format() const { return {dim, key_type, value_type}; }
};

class PageStore {
 public:
  static constexpr int64_t kPageBytes = 4096;
  static constexpr int64_t kHeaderBytes = 16;

  // Creates (truncates) `path`; records are stored as `format` says.
  PageStore(const std::string& path, RecordFormat format, Layout layout, bool direct_io = true);
  // fp32 records of `dim` values.
  PageStore(const std::string& path, int64_t dim, Layout layout, bool direct_io = true)
      : PageStore(path, RecordFormat{dim}, layout, direct_io) {}
  ~PageStore();
  PageStore(const PageStore&) = delete;
  PageStore& operator=(const PageStore&) = delete;

  int64_t dim() const { return dim_; }
  const RecordFormat& format() const { return format_; }
  int64_t record_bytes() const { return format_.record_bytes(); }
  int64_t per_page() const { return (kPageBytes - kHeaderBytes) / record_bytes(); }
  bool direct() const { return direct_; }
  Layout layout() const { return layout_; }
  const std::string& path() const { return path_; }
  int64_t file_pages() const { return next_page_; }
  // Pool size for new dual-head pools (the builder sets it to twice the largest initial cluster).
  void set_pool_pages(int64_t pages) { pool_pages_ = std::max<int64_t>(pages, 2); }
  // Where clusters written whole from now on keep their unfilled last page; RAM is counted by tail_bytes().
  void set_tail_placement(TailPlacement placement) { tail_placement_ = placement; }

  // New cluster holding `records`; with a partner (dual-head) it takes the free end of its pool.
  int64_t create(const EntryBlock& records, int64_t partner = -1);
  void append(int64_t uid, const float* key, const float* value, int64_t position);
  // Replaces the cluster's content (a split's staying child), in place when it fits.
  void rewrite(int64_t uid, const EntryBlock& records);
  void drop(int64_t uid);
  int64_t entries(int64_t uid) const;
  bool contains(int64_t uid) const;
  // RAM the write buffers hold: every cluster's unfilled last page, in fp32 until it fills and goes out.
  int64_t tail_bytes() const;

  // Reads whole clusters, sorted by offset; runs at most `gap_pages` apart become one read.
  std::vector<EntryBlock> read(const std::vector<int64_t>& uids, int64_t gap_pages = 0);

  // Prefetch support: the clusters' pages on storage only (no RAM write buffer), each with the version
  // of its pages. complete() later appends the current write buffer if the pages are still that
  // version, giving exactly what read() would return then; false when they changed (rewrite, split, a
  // page filled or written out, a partial page read back into the buffer).
  struct PageImage {
    EntryBlock records;
    uint64_t version = 0;
  };
  std::vector<PageImage> read_pages(const std::vector<int64_t>& uids, int64_t gap_pages = 0);
  bool complete(int64_t uid, const PageImage& image, EntryBlock* out) const;

  // Writes the last pages and returns the manifest; also publishes the store (below) unless told not
  // to, for a caller that publishes it together with its index.
  StoreManifest commit(bool publish = true);
  // Syncs the file and, the first time, renames it from its temporary name beside path() to path().
  // A store never published is removed when the PageStore dies; path() is untouched until then.
  void publish();
  static void verify(const std::string& path, const StoreManifest& manifest);
  // Sequential read bandwidth of the file (bytes/s), in 1 MiB reads with the same I/O mode.
  double sequential_read_bandwidth(int64_t min_total_bytes = int64_t{64} << 20);

  IoCounters counters() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return io_;
  }

 private:
  struct Extent {
    int64_t pool = -1;
    bool back = false;
    int64_t full_pages = 0;
    EntryBlock tail;                 // RAM write buffer: the unfilled last page (empty when `flushed`)
    int64_t flushed = 0;             // records of the unfilled last page on storage (its RAM buffer empty)
    uint32_t flushed_crc = 0;        // that page's CRC, for the commit digest
    std::vector<uint32_t> page_crc;  // of the full pages, for the commit digest
    uint64_t version = 0;            // changes whenever its pages on storage (or their place) change
    bool live = false;
  };
  struct Pool {
    int64_t first_page = 0, capacity = 0;
    int64_t front = -1, back = -1;
  };

  // Pages a cluster occupies: its full pages plus its unfilled last page (on storage or in RAM).
  int64_t slots(const Extent& e) const { return e.full_pages + (e.tail.empty() && e.flushed == 0 ? 0 : 1); }
  // Pages a read of the cluster covers: the full pages and a partial last page on storage.
  int64_t stored_pages(const Extent& e) const { return e.full_pages + (e.flushed > 0 ? 1 : 0); }
  // Brings a partial last page on storage back into the RAM write buffer before it changes.
  void load_flushed(int64_t uid);
  bool is_live(int64_t uid) const;
  int64_t slot_page(const Extent& e, int64_t slot) const;
  // The lowest of the cluster's first `pages` slots, which lie in one run (back clusters in reverse order).
  int64_t run_first_page(const Extent& e, int64_t pages) const;
  int64_t free_slots(const Pool& p) const;
  int64_t new_pool(int64_t capacity);
  void place(int64_t uid, int64_t pages_needed, int64_t partner);
  void relocate(int64_t uid, int64_t pages_needed);
  void write_page(int64_t page, int64_t uid, const EntryBlock& block, int64_t begin, int64_t count, uint32_t* crc_out);
  void write_records(int64_t uid, const EntryBlock& records);
  // Reads made to change a cluster (a partial page back into its buffer, a move), under the mutex.
  void pread_for_update(int64_t first_page, int64_t pages, uint8_t* buffer);

  // Where a read's clusters lie, noted under the mutex: the coalesced runs and each cluster's pages.
  struct ReadPlan {
    struct Run {
      int64_t first = 0, pages = 0;
    };
    struct Cluster {
      int64_t uid = 0;
      uint64_t version = 0;
      std::vector<int64_t> pages;  // file page of each stored slot, in slot order
      int64_t last_count = 0;      // records on the last page (per_page() on full pages before it)
    };
    std::vector<Run> runs;
    std::vector<Cluster> clusters;
  };
  // The plan's pages as read from the file, with the time and bytes the reads took.
  struct FetchedPages {
    AlignedBytes buffer;
    std::vector<std::pair<int64_t, int64_t>> where;  // (first page of a run, its page offset in buffer)
    IoCounters io;
  };
  ReadPlan plan_read(const std::vector<int64_t>& uids, int64_t gap_pages) const;
  FetchedPages fetch(const ReadPlan& plan) const;  // no mutex needed: pread beside writes is safe
  // Plans under `lock` (held on entry and on return), reads without it unless `hold`, counts the reads;
  // `unchanged[c]`: the plan's cluster c kept its version meanwhile, so its pages as read are current.
  ReadPlan fetch_outside_lock(std::unique_lock<std::mutex>& lock, const std::vector<int64_t>& uids, int64_t gap_pages,
                              bool hold, FetchedPages* fetched, std::vector<bool>* unchanged);
  EntryBlock decode(const ReadPlan::Cluster& cluster, const FetchedPages& fetched) const;
  // Throws unless `page` (file page `page_number`) is cluster `uid`'s, holds `count` records and passes its CRC.
  void check_page(const uint8_t* page, int64_t page_number, int64_t uid, int64_t count) const;
  void count_reads(const IoCounters& io);

  mutable std::mutex mutex_;  // every public operation: the I/O thread reads while the decode thread appends
  void publish_locked();
  std::string path_;
  std::string temp_path_;  // where the file is until published; empty after
  RecordFormat format_;
  int64_t dim_;
  Layout layout_;
  bool direct_ = false;
  int fd_ = -1;
  uint64_t generation_ = 0;
  int64_t next_page_ = 1;  // page 0: file header
  int64_t pool_pages_ = 8;
  TailPlacement tail_placement_ = TailPlacement::kStorage;
  int64_t open_pool_ = -1;  // the newest pool with a free back end
  std::vector<Extent> extents_;
  std::vector<Pool> pools_;
  IoCounters io_;
  uint8_t* page_buffer_ = nullptr;
  int64_t pages_written_ = 0, crash_after_pages_ = -1;
  uint64_t next_version_ = 1;
};

}  // namespace kvc::retrieval
