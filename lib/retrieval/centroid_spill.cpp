#include "retrieval/centroid_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>

#include "retrieval/page_io.h"
#include "retrieval/page_store.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

int64_t page_multiple(int64_t bytes) {
  const int64_t p = PageStore::kPageBytes;
  return std::max<int64_t>(p, (bytes + p - 1) / p * p);
}

}  // namespace

CentroidSpill::CentroidSpill(const std::string& beside, IoThread* io, bool direct_io) : io_(io) {
  std::filesystem::path folder = std::filesystem::path(beside).parent_path();
  if (folder.empty()) folder = ".";
  where_ = folder.string();
  std::string name = (folder / ".kvc-centroids-XXXXXX").string();
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  fd_ = ::mkostemp(buffer.data(), O_CLOEXEC);
  KVC_CHECK(fd_ >= 0, "centroids=storage: cannot create a centroid file in '{}': {}", where_, std::strerror(errno));
  ::unlink(buffer.data());  // the file this constructor just made: it lives as long as the descriptor
  if (direct_io) {
    const int flags = ::fcntl(fd_, F_GETFL);
    direct_ = flags >= 0 && ::fcntl(fd_, F_SETFL, flags | O_DIRECT) == 0;
  }
}

CentroidSpill::~CentroidSpill() {
  // Transfers still queued on the I/O thread use the descriptor: wait for them before closing it.
  for (auto& [layer, f] : pending_)
    if (f.valid()) f.wait();
  for (auto& f : writes_)
    if (f.valid()) f.wait();
  ::close(fd_);
}

void CentroidSpill::note_held(int64_t delta_bytes) {
  // Called from the decode thread and the I/O thread.
  const int64_t now = held_.fetch_add(delta_bytes) + delta_bytes;
  int64_t peak = peak_.load();
  while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
  }
}

void CentroidSpill::note_resident(int64_t delta_bytes) { note_held(delta_bytes); }

CentroidSpillCounters CentroidSpill::counters() const {
  CentroidSpillCounters c = counters_;
  c.peak_held_bytes = peak_.load();
  return c;
}

float* CentroidSpill::start_write(int64_t layer, int64_t floats) {
  KVC_CHECK(!writing_, "internal: a centroid write started before the last one was finished");
  const int64_t bytes = floats * 4;
  Region& r = regions_[layer];
  if (page_multiple(bytes) > r.capacity) {  // outgrown (or new): a region twice the size at the end
    r.capacity = page_multiple(2 * bytes);
    r.offset = end_;
    end_ += r.capacity;
  }
  r.floats = floats;
  writing_bytes_ = page_multiple(bytes);
  writing_offset_ = r.offset;
  writing_ = std::shared_ptr<uint8_t>(aligned_bytes(writing_bytes_).release(), std::free);
  note_held(writing_bytes_);
  counters_.written_bytes += bytes;
  counters_.writes += 1;
  return reinterpret_cast<float*>(writing_.get());
}

void CentroidSpill::finish_write() {
  auto job = [this, data = std::move(writing_), bytes = writing_bytes_, offset = writing_offset_] {
    full_pwrite(fd_, data.get(), bytes, offset, where_ + " (centroids)");
    note_held(-bytes);
  };
  writing_.reset();
  std::vector<std::future<void>> unfinished;
  for (auto& f : writes_) {
    if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready) f.get();  // rethrows a failed write
    else unfinished.push_back(std::move(f));
  }
  writes_ = std::move(unfinished);
  if (io_) writes_.push_back(io_->submit(std::move(job)));
  else job();
}

SpilledCentroids CentroidSpill::read_now(const Region& r) {
  const int64_t rounded = page_multiple(r.floats * 4);
  note_held(rounded);
  SpilledCentroids out{std::shared_ptr<uint8_t>(aligned_bytes(rounded).release(), std::free), r.floats};
  full_pread(fd_, out.buffer.get(), rounded, r.offset, where_ + " (centroids)");
  return out;
}

void CentroidSpill::release(const SpilledCentroids& read) { note_held(-page_multiple(read.floats * 4)); }

void CentroidSpill::read_ahead(int64_t layer) {
  if (!on_storage(layer) || pending_.count(layer) != 0) return;
  counters_.read_ahead += 1;
  const Region r = regions_.at(layer);
  pending_.emplace(layer, run_on(io_, [this, r] { return read_now(r); }));
}

SpilledCentroids CentroidSpill::take(int64_t layer) {
  KVC_CHECK(on_storage(layer), "internal: centroids of layer {} taken back but not on storage", layer);
  const auto t0 = std::chrono::steady_clock::now();
  auto it = pending_.find(layer);
  SpilledCentroids floats;
  if (it != pending_.end()) {
    floats = it->second.get();
    pending_.erase(it);
  } else {
    counters_.demand_reads += 1;
    const Region r = regions_.at(layer);
    // Through the I/O thread, behind the layer's write that may still be queued there.
    floats = io_ ? io_->submit([this, r] { return read_now(r); }).get() : read_now(r);
  }
  counters_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  counters_.reads += 1;
  counters_.read_bytes += floats.floats * 4;
  regions_[layer].floats = -1;
  return floats;
}

}  // namespace kvc::retrieval
