#pragma once
// Grain sizes for at::parallel_for: a parallel region wakes the other threads, which costs microseconds
// on an idle machine and up to a scheduler slice when another process holds a core. Work below
// kMinParallelWork (multiply-adds or elements) per thread stays on the calling thread, so small models
// never wake threads. The figure is LibTorch's own grain for element-wise ops.
#include <algorithm>
#include <cstdint>

namespace kvc {

constexpr int64_t kMinParallelWork = 32768;

// Items per thread when each item costs `work_per_item`.
inline int64_t parallel_grain(int64_t work_per_item) {
  return std::max<int64_t>(1, kMinParallelWork / std::max<int64_t>(1, work_per_item));
}

}  // namespace kvc
