#pragma once
// The physical limits benchmarks are judged against, measured on this machine in the same run.
#include <cstdint>

namespace kvc {

struct MemoryBandwidth {
  double copy_bytes_per_second = 0;  // STREAM "copy" convention: bytes read + bytes written
  double read_bytes_per_second = 0;  // a pure streaming read, the decode-relevant figure
};

// Multi-threaded (LibTorch's pool) over buffers far larger than the caches; the best of LibTorch's
// own operations and plain per-thread streams.
MemoryBandwidth measure_memory_bandwidth(int64_t buffer_bytes = int64_t{512} << 20, int repeats = 5);

// Best fp32 GEMM rate (FLOP/s) over square products of size n.
double measure_gemm_flops(int64_t n = 1024, int repeats = 5);

}  // namespace kvc
