#include "kernels/block_isa.h"

#include <algorithm>
#include <atomic>

#include "kernels/cpu_features.h"

namespace kvc {
namespace {

std::atomic<int> cap{static_cast<int>(BlockIsa::Avx512Vnni)};

}  // namespace

BlockIsa best_block_isa() {
#if defined(__x86_64__)
  static const BlockIsa best = [] {
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512vnni") && cpu_has_avx2_fma()) {
      return BlockIsa::Avx512Vnni;
    }
    return cpu_has_avx2_fma() ? BlockIsa::Avx2 : BlockIsa::Portable;
  }();
  return best;
#else
  return BlockIsa::Portable;
#endif
}

BlockIsa block_isa() {
  return static_cast<BlockIsa>(std::min(static_cast<int>(best_block_isa()), cap.load(std::memory_order_relaxed)));
}

void limit_block_isa(BlockIsa level) { cap.store(static_cast<int>(level)); }

const char* block_isa_name(BlockIsa isa) {
  switch (isa) {
    case BlockIsa::Avx512Vnni: return "avx512vnni";
    case BlockIsa::Avx2: return "avx2";
    case BlockIsa::Portable: return "portable";
  }
  return "unknown";
}

}  // namespace kvc
