#include "bench/hardware_limits.h"

#include <ATen/ATen.h>

#include <chrono>

namespace kvc {
namespace {

template <typename F>
double best_seconds(int repeats, F&& body) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto start = std::chrono::steady_clock::now();
    body();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(int64_t buffer_bytes, int repeats) {
  const int64_t n = buffer_bytes / 4;
  const at::Tensor src = at::rand({n});
  at::Tensor dst = at::empty({n});
  dst.copy_(src);  // touch every page before timing
  MemoryBandwidth bw;
  const double copy_s = best_seconds(repeats, [&] { dst.copy_(src); });
  bw.copy_bytes_per_second = 2.0 * static_cast<double>(buffer_bytes) / copy_s;
  volatile float sink = 0;
  const double read_s = best_seconds(repeats, [&] { sink = src.sum().item<float>(); });
  (void)sink;
  bw.read_bytes_per_second = static_cast<double>(buffer_bytes) / read_s;
  return bw;
}

double measure_gemm_flops(int64_t n, int repeats) {
  const at::Tensor a = at::rand({n, n}), b = at::rand({n, n});
  at::Tensor c = at::mm(a, b);
  const double s = best_seconds(repeats, [&] { at::mm_out(c, a, b); });
  return 2.0 * static_cast<double>(n * n * n) / s;
}

}  // namespace kvc
