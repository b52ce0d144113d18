#pragma once
// The physical limits benchmarks are judged against, measured on this machine in the same run.
#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace kvc {

struct MemoryBandwidth {
  double copy_bytes_per_second = 0;  // STREAM "copy" convention: bytes read + bytes written
  double read_bytes_per_second = 0;  // a pure streaming read, the decode-relevant figure
};

// Multi-threaded (LibTorch's pool) over buffers far larger than the caches; the best of LibTorch's
// own operations and plain per-thread streams.
MemoryBandwidth measure_memory_bandwidth(int64_t buffer_bytes = int64_t{512} << 20, int repeats = 5);

// Best rate (bytes/s) of a parallel streaming read over these CPU tensors (fp32, bf16, f16 or uint8
// blocks, read as fp32 words), e.g. a model's weights
// in the pages they really occupy: a synthetic buffer may land in other pages (4 KiB instead of huge
// pages) and understate what decoding those weights can reach.
double measure_read_bandwidth(const std::vector<at::Tensor>& tensors, int repeats = 5);

// Best fp32 GEMM rate (FLOP/s) over square products of size n.
double measure_gemm_flops(int64_t n = 1024, int repeats = 5);

// The same limits for a GPU: a device-to-device copy and a sum over a buffer far larger than its
// caches, and the GEMM rate in the model's dtype (random operands: zeros run faster than real data).
MemoryBandwidth measure_device_bandwidth(at::Device device, int64_t buffer_bytes = int64_t{2} << 30, int repeats = 10);
double measure_device_gemm_flops(at::Device device, at::ScalarType dtype, int64_t n = 8192, int repeats = 10);

}  // namespace kvc
