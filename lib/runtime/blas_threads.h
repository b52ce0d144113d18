#pragma once
// OpenBLAS keeps its own thread pool beside LibTorch's OpenMP pool; when both spin on 2 cores they
// spend most of a decode step in sched_yield. kvc gives OpenBLAS threads only for multi-row GEMMs
// (prefill) and splits single-row products across LibTorch's threads itself.
namespace kvc {

// Sets OpenBLAS's thread count if the BLAS in use is OpenBLAS; otherwise does nothing.
void set_blas_threads(int threads);

}  // namespace kvc
