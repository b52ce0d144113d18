#include "runtime/blas_threads.h"

#include <dlfcn.h>

namespace kvc {

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  // Looked up at run time: the BLAS behind LibTorch is chosen by the system (update-alternatives).
  static const auto set = reinterpret_cast<SetThreads>(::dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  static int current = -1;
  if (set != nullptr && threads != current) {
    set(threads);
    current = threads;
  }
}

}  // namespace kvc
