#pragma once
// Runtime CPU feature checks: the hand-written kernels are compiled for AVX2+FMA with function
// attributes, so the library still runs (on the LibTorch paths) on a CPU without them.

namespace kvc {

bool cpu_has_avx2_fma();

}  // namespace kvc
