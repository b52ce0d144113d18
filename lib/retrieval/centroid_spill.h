#pragma once
// DynaKV's Pipeline 1 (centroids=storage): the cluster representatives of every layer live in a file
// of their own, not in RAM. A layer's centroids are written out when its decode step ends and read
// back ahead of its next step, issued when the layer before it ends, so the read overlaps that
// layer's output projection and MLP and this layer's Q/K/V projections. RAM holds the centroids of the
// layer being computed and of the one being read, whatever the number of layers.
//
// One region per layer, page-aligned (O_DIRECT where the file system allows it, as the store); a
// layer whose centroids outgrow their region moves to a region twice the size at the file's end.
// Reads and writes run on the store's I/O thread in submission order, so a read always sees the
// layer's last write. The file is made with mkstemp beside the store and unlinked at once: it has no
// name a user could see or that could collide, and it goes with the process however that ends.
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "retrieval/io_thread.h"

namespace kvc::retrieval {

// One layer's centroids as read back: the page-aligned buffer of the read itself (no second copy).
struct SpilledCentroids {
  std::shared_ptr<uint8_t> buffer;
  int64_t floats = 0;
  const float* data() const { return reinterpret_cast<const float*>(buffer.get()); }
};

struct CentroidSpillCounters {
  int64_t written_bytes = 0, writes = 0;
  int64_t read_bytes = 0, reads = 0;
  int64_t read_ahead = 0;       // reads issued before the layer asked (the pipeline's)
  int64_t demand_reads = 0;     // reads the layer waited for from the start (nothing was read ahead)
  double wait_seconds = 0;      // decode thread blocked on a centroid read
  int64_t peak_held_bytes = 0;  // most centroid bytes in RAM at once: resident tables, reads and writes in flight
};

class CentroidSpill {
 public:
  // `beside`: the store's path (the file goes in its folder); `io`: null runs every transfer inline.
  CentroidSpill(const std::string& beside, IoThread* io, bool direct_io);
  ~CentroidSpill();
  CentroidSpill(const CentroidSpill&) = delete;
  CentroidSpill& operator=(const CentroidSpill&) = delete;

  // Sends `layer`'s centroids out of RAM: the caller fills the `floats` returned by start_write (all its
  // heads' tables, spilled in order; the write's own page-aligned buffer), then calls finish_write.
  float* start_write(int64_t layer, int64_t floats);
  void finish_write();
  // Starts reading `layer`'s centroids back (nothing if it has none on storage or a read is in flight).
  void read_ahead(int64_t layer);
  // `layer`'s centroids: the read ahead when there is one, else a read now (after any queued write).
  // Counted as held until the caller has restored its tables and calls release(it).
  SpilledCentroids take(int64_t layer);
  void release(const SpilledCentroids& read);
  bool on_storage(int64_t layer) const { return regions_.count(layer) != 0 && regions_.at(layer).floats >= 0; }

  // The tables resident in RAM (the layer caches report what they hold), for the peak.
  void note_resident(int64_t delta_bytes);
  CentroidSpillCounters counters() const;
  bool direct() const { return direct_; }

 private:
  struct Region {
    int64_t offset = 0, capacity = 0;  // bytes, page multiples
    int64_t floats = -1;               // the last write's size; -1: taken back (RAM has it)
  };
  SpilledCentroids read_now(const Region& r);
  void note_held(int64_t delta_bytes);

  std::string where_;  // for messages: the folder the file was made in
  IoThread* io_;
  int fd_ = -1;
  bool direct_ = false;
  int64_t end_ = 0;  // bytes allocated in the file
  std::unordered_map<int64_t, Region> regions_;
  std::unordered_map<int64_t, std::future<SpilledCentroids>> pending_;
  std::shared_ptr<uint8_t> writing_;  // between start_write and finish_write
  int64_t writing_bytes_ = 0, writing_offset_ = 0;
  std::vector<std::future<void>> writes_;  // finished ones are dropped as new ones are queued
  std::atomic<int64_t> held_{0};           // bytes in RAM: resident tables + buffers of transfers in flight
  std::atomic<int64_t> peak_{0};
  CentroidSpillCounters counters_;
};

}  // namespace kvc::retrieval
