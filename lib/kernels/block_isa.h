#pragma once
// The instruction set the block kernels (block_matvec.h), the activation quantizer and decode attention's
// AVX-512 passes (decode_attention_avx512.h) run on, chosen at run time: AVX-512 with VNNI (F, BW, VL,
// VNNI), else AVX2 with FMA, else portable C++.
namespace kvc {

enum class BlockIsa { Portable = 0, Avx2 = 1, Avx512Vnni = 2 };

// The best level this CPU has, at most the cap below.
BlockIsa block_isa();
// Caps the level (tests cover every level the CPU has; benchmarks compare them). Not for use while a
// product runs on another thread.
void limit_block_isa(BlockIsa cap);
// The best level this CPU has, whatever the cap.
BlockIsa best_block_isa();
const char* block_isa_name(BlockIsa isa);

}  // namespace kvc
