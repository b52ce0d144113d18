#include "bench/hardware_limits.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/parallel_linear.h"
#include "kernels/simd_avx2.h"
#include "runtime/blas_threads.h"

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

// GPU work is asynchronous: each timed body ends by waiting for the device.
template <typename F>
double best_device_seconds(at::Device device, int repeats, F&& body) {
  body();  // warm-up: kernel load, library handles
  torch::cuda::synchronize(device.index());
  return best_seconds(repeats, [&] {
    body();
    torch::cuda::synchronize(device.index());
  });
}

#if defined(__x86_64__)
// Sum of data[0, n): one sequential stream per thread with four independent accumulators, the access
// pattern of the decode kernels (LibTorch's sum() came out below what decoding itself reached).
KVC_AVX2 float stream_sum(const float* data, int64_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_loadu_ps(data + i));
    a1 = _mm256_add_ps(a1, _mm256_loadu_ps(data + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_loadu_ps(data + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_loadu_ps(data + i + 24));
  }
  float s = simd::horizontal_sum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  for (; i < n; ++i) s += data[i];
  return s;
}
#endif

// Each thread streams one contiguous share (at::parallel_for splits the range that way); tensors under
// 256 KiB stay on one thread.
constexpr int64_t kStreamGrain = int64_t{1} << 16;

float parallel_read(const at::Tensor& t) {
  const float* data = t.data_ptr<float>();
  return at::parallel_reduce(
      int64_t{0}, t.numel(), kStreamGrain, 0.0f,
      [&](int64_t begin, int64_t end, float) {
#if defined(__x86_64__)
        if (cpu_has_avx2_fma()) return stream_sum(data + begin, end - begin);
#endif
        return t.narrow(0, begin, end - begin).sum().item<float>();
      },
      std::plus<float>());
}

void parallel_copy(at::Tensor& dst, const at::Tensor& src) {
  float* out = dst.data_ptr<float>();
  const float* in = src.data_ptr<float>();
  at::parallel_for(int64_t{0}, src.numel(), kStreamGrain, [&](int64_t begin, int64_t end) {
    std::memcpy(out + begin, in + begin, static_cast<size_t>(end - begin) * sizeof(float));
  });
}

}  // namespace

MemoryBandwidth measure_memory_bandwidth(int64_t buffer_bytes, int repeats) {
  const int64_t n = buffer_bytes / 4;
  const at::Tensor src = at::rand({n});
  at::Tensor dst = at::empty({n});
  dst.copy_(src);  // touch every page before timing
  MemoryBandwidth bw;
  // Best of LibTorch's copy and a plain per-thread memcpy, so neither implementation caps the limit.
  const double copy_s =
      std::min(best_seconds(repeats, [&] { dst.copy_(src); }), best_seconds(repeats, [&] { parallel_copy(dst, src); }));
  bw.copy_bytes_per_second = 2.0 * static_cast<double>(buffer_bytes) / copy_s;
  volatile float sink = 0;
  const double read_s = std::min(best_seconds(repeats, [&] { sink = src.sum().item<float>(); }),
                                 best_seconds(repeats, [&] { sink = parallel_read(src); }));
  (void)sink;
  bw.read_bytes_per_second = static_cast<double>(buffer_bytes) / read_s;
  return bw;
}

double measure_read_bandwidth(const std::vector<at::Tensor>& tensors, int repeats) {
  double bytes = 0;
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : tensors) {
    if (!t.device().is_cpu() || !t.is_contiguous()) continue;
    if (t.scalar_type() != at::kFloat && t.scalar_type() != at::kBFloat16 && t.scalar_type() != at::kHalf &&
        t.scalar_type() != at::kByte) {
      continue;
    }
    // 16-bit weights and GGUF blocks are streamed as the same bytes read as fp32: only the traffic matters.
    const auto words = static_cast<int64_t>(t.nbytes() / 4);
    if (words == 0) continue;
    flat.push_back(at::from_blob(t.data_ptr(), {words}, at::TensorOptions().dtype(at::kFloat)));
    bytes += static_cast<double>(words) * 4;
  }
  if (flat.empty()) return 0;
  volatile float sink = 0;
  const double s = best_seconds(repeats, [&] {
    for (const at::Tensor& t : flat) sink = sink + parallel_read(t);
  });
  (void)sink;
  return bytes / s;
}

double measure_gemm_flops(int64_t n, int repeats) {
  const at::Tensor a = at::rand({n, n}), b = at::rand({n, n});
  at::Tensor c = at::mm(a, b);
  // Best of OpenBLAS's own threading and the split the model uses (single-threaded GEMMs on
  // LibTorch's threads, kernels/parallel_linear.h), so the peak is the machine's, not one library's.
  set_blas_threads(at::get_num_threads());
  const double blas_s = best_seconds(repeats, [&] { at::mm_out(c, a, b); });
  const at::Tensor b_t = b.t().contiguous();
  const double split_s = best_seconds(repeats, [&] { c = parallel_linear(a, b_t, {}); });
  set_blas_threads(1);  // as the forward pass runs
  return 2.0 * static_cast<double>(n * n * n) / std::min(blas_s, split_s);
}

MemoryBandwidth measure_device_bandwidth(at::Device device, int64_t buffer_bytes, int repeats) {
  const auto options = at::TensorOptions().dtype(at::kFloat).device(device);
  const at::Tensor src = at::rand({buffer_bytes / 4}, options);
  at::Tensor dst = at::empty_like(src), sum = at::empty({}, options);
  MemoryBandwidth bw;
  bw.copy_bytes_per_second =
      2.0 * static_cast<double>(buffer_bytes) / best_device_seconds(device, repeats, [&] { dst.copy_(src); });
  bw.read_bytes_per_second =
      static_cast<double>(buffer_bytes) / best_device_seconds(device, repeats, [&] { at::sum_out(sum, src); });
  return bw;
}

double measure_device_gemm_flops(at::Device device, at::ScalarType dtype, int64_t n, int repeats) {
  const auto options = at::TensorOptions().dtype(dtype).device(device);
  const at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  at::Tensor c = at::empty({n, n}, options);
  return 2.0 * static_cast<double>(n * n * n) / best_device_seconds(device, repeats, [&] { at::mm_out(c, a, b); });
}

}  // namespace kvc
