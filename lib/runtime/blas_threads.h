#pragma once
// OpenBLAS keeps its own thread pool beside LibTorch's OpenMP pool; when both spin on the same cores
// they spend much of a step in sched_yield instead of computing. On the CPU, kvc therefore runs
// OpenBLAS single-threaded and splits the work over LibTorch's threads itself: single-row products in
// kernels/matvec.h, multi-row GEMMs in kernels/parallel_linear.h (one single-threaded GEMM per thread).
// On a GPU the forward pass leaves OpenBLAS LibTorch's thread count.
namespace kvc {

// Sets OpenBLAS's thread count if the BLAS in use is OpenBLAS; otherwise does nothing.
void set_blas_threads(int threads);

}  // namespace kvc
