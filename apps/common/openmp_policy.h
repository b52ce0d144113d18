#pragma once
// LibTorch's OpenMP threads spin between parallel regions by default; with as many threads as cores
// they steal the cores OpenBLAS's own threads need. With a passive wait policy kvc-bench measured
// prefill at 512 tokens 316-349 -> 533-546 tok/s and decode 47-48 -> 52-54 tok/s on the 2-core box.
// libgomp reads OMP_WAIT_POLICY when it is loaded, before main runs: so set it and re-execute once.
#include <unistd.h>

#include <cstdlib>

namespace kvc::cli {

inline void ensure_passive_openmp(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;  // the user's choice (or already re-executed)
  ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  ::execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace kvc::cli
