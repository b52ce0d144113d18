#pragma once
// A parallel loop for streaming work whose threads do not run at the same speed: a thread that a
// static split leaves waiting at the end (it started late, or its share streamed slower) helps with
// what is left instead. A decode step's matrix-vector products showed exactly this wait: the calling
// thread idled at the end of every product while the other finished its half.
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace kvc {

// Calls fn(begin, end) on disjoint chunks of at most `chunk` items that together cover [0, n), over
// LibTorch's threads. Each thread owns one contiguous share and takes its chunks in order from the
// front, so it streams sequentially as under a static split; a thread whose share is done takes the
// next chunks of the other shares. Which thread runs a chunk varies from call to call, so fn must
// give the same result on any thread. With one thread, n <= chunk, or inside a parallel region, it is
// one call fn(0, n) on the calling thread.
// `alongside`, when given, runs once on the calling thread before that thread takes any chunk, while
// the other threads already work through theirs: work that does not depend on fn's results overlaps
// with it instead of running before it. An exception from it or from fn reaches the caller.
template <typename Fn>
void balanced_parallel_for(int64_t n, int64_t chunk, const Fn& fn, const std::function<void()>& alongside = {}) {
  const int threads = at::get_num_threads();
  chunk = std::max<int64_t>(1, chunk);
  if (threads <= 1 || n <= chunk || at::in_parallel_region()) {
    if (alongside) alongside();
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  struct alignas(64) Cursor {  // one cache line each: the owner's claims do not slow the others'
    std::atomic<int64_t> next{0};
  };
  std::vector<Cursor> cursors(static_cast<size_t>(threads));
  const int64_t share = (n + threads - 1) / threads;
  for (int t = 0; t < threads; ++t) cursors[static_cast<size_t>(t)].next.store(t * share, std::memory_order_relaxed);
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> ran_alongside{!alongside};
  at::parallel_for(0, threads, 1, [&](int64_t first, int64_t) {
    if (std::this_thread::get_id() == caller && !ran_alongside.exchange(true)) alongside();
    for (int k = 0; k < threads; ++k) {
      const int owner = static_cast<int>((first + k) % threads);
      const int64_t end = std::min(n, (owner + 1) * share);
      std::atomic<int64_t>& next = cursors[static_cast<size_t>(owner)].next;
      for (int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed); begin < end;
           begin = next.fetch_add(chunk, std::memory_order_relaxed)) {
        fn(begin, std::min(end, begin + chunk));
      }
    }
  });
  if (!ran_alongside.exchange(true)) alongside();  // a backend that left the calling thread out
}

}  // namespace kvc
