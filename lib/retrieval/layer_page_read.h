#pragma once
// One layer's clusters read from storage ahead of that layer's step (the next-layer prefetch and the
// virtual cache's read-back): started at the end of one layer's step, on the I/O thread when there is
// one, and waited for at the start of the layer it was read for. The images are checked against the
// store (PageStore::complete) by the caller before use: a cluster may change while it is read.
#include <chrono>
#include <cstdint>
#include <future>
#include <utility>
#include <vector>

#include "retrieval/io_thread.h"
#include "retrieval/page_store.h"

namespace kvc::retrieval {

class LayerPageRead {
 public:
  LayerPageRead() = default;
  ~LayerPageRead() {
    if (pending_.valid()) pending_.wait();  // the read uses the store: let it finish first
  }
  LayerPageRead(const LayerPageRead&) = delete;
  LayerPageRead& operator=(const LayerPageRead&) = delete;

  bool in_flight() const { return pending_.valid(); }
  // Whether the read in flight was started for `layer`.
  bool for_layer(int64_t layer) const { return pending_.valid() && layer_ == layer; }
  // Reads `uids`' pages for `layer` (runs of pages at most `gap_pages` apart in one read).
  void start(int64_t layer, PageStore* store, IoThread* io, std::vector<int64_t> uids, int64_t gap_pages) {
    layer_ = layer;
    pending_ = run_on(io, [store, uids = std::move(uids), gap_pages] { return store->read_pages(uids, gap_pages); });
  }
  // Waits for the read in flight, adding the seconds the caller was blocked to `*wait_seconds`, and
  // returns its page images (in the order of the uids it was started with).
  std::vector<PageStore::PageImage> finish(double* wait_seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<PageStore::PageImage> images = pending_.get();
    *wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    layer_ = -1;
    return images;
  }

 private:
  int64_t layer_ = -1;
  std::future<std::vector<PageStore::PageImage>> pending_;
};

}  // namespace kvc::retrieval
