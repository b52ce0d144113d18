#pragma once
// Runtime CPU feature checks: the hand-written kernels are compiled for AVX2+FMA with function
// attributes, so the library still runs (on the LibTorch paths) on a CPU without them.

namespace kvc {

bool cpu_has_avx2_fma();  // and F16C, which every AVX2 CPU has

// Whether this library's at::parallel_for calls can use more than one thread. at::parallel_for is a
// header template: compiled without OpenMP it silently runs every kernel on one thread.
bool kernels_run_in_parallel();

}  // namespace kvc
