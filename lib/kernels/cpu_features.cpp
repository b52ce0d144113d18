#include "kernels/cpu_features.h"

#include <ATen/Parallel.h>

namespace kvc {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
  return has;
#else
  return false;
#endif
}

bool kernels_run_in_parallel() {
#if defined(INTRA_OP_PARALLEL)
  return true;
#else
  return false;
#endif
}

}  // namespace kvc
