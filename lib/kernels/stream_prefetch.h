#pragma once
// Software prefetch for the kernels that stream a matrix or the KV cache from memory once per decode
// step. On the virtual machines measured, the hardware prefetchers alone kept such a stream well short
// of the read bandwidth; asking for the bytes 4 KB ahead of the ones being multiplied took Gemma 3's
// decode from 64 to 75 tok/s on an AVX2 EPYC (2 threads, medians of alternated kvc-bench runs; 2, 3, 6
// and 8 KB measured 70, 73, 74 and 76) and SmolLM2's attention-heavy decode after 4096 tokens 1.29x faster
// on an AVX-512 Xeon (docs/gguf-block-weights.md).
#include <cstdint>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace kvc {

constexpr int64_t kStreamPrefetchBytes = 4096;

// Every cache line of [p, p + bytes) shifted kStreamPrefetchBytes ahead. Reads past the end of the data
// are hints only: a prefetch never faults.
inline void prefetch_ahead(const void* p, int64_t bytes) {
#if defined(__x86_64__)
  const char* c = static_cast<const char*>(p) + kStreamPrefetchBytes;
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T0);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace kvc
