#pragma once
// How append-only buffers (caches, their bookkeeping) grow: by half their size plus a little, so an
// append is amortised O(1) (each row copied O(1) times) and a small buffer does not regrow every step.
#include <algorithm>
#include <cstdint>

namespace kvc {

inline int64_t grown_capacity(int64_t needed, int64_t capacity) {
  return std::max(needed, capacity + capacity / 2 + 16);
}

}  // namespace kvc
