#pragma once
// Software prefetch for the kernels that stream a matrix or the KV cache from memory once per decode
// step. On the virtual machines measured, the hardware prefetchers alone kept such a stream well short
// of the read bandwidth; asking for the bytes 4 KB ahead of the ones being multiplied took Gemma 3's
// decode from 64 to 75 tok/s on an AVX2 EPYC (2 threads, medians of alternated kvc-bench runs; 2, 3, 6
// and 8 KB measured 70, 73, 74 and 76) and SmolLM2's attention-heavy decode after 4096 tokens 1.29x faster
// on an AVX-512 Xeon (docs/gguf-block-weights.md). The lines go to L2 (T1), not L1 (T0): a T0 prefetch
// holds one of the core's few L1 fill buffers until the line arrives, which capped how many lines were in
// flight; on the AVX-512 Xeon (2 threads, alternated kvc-bench runs, medians of 3) T1 took Gemma 3's decode
// from 61.7 to 71.2 tok/s after 512 tokens and from 57.7 to 65.7 after 4096, SmolLM2's from 72.9 to 79.4
// after 4096 (unchanged after 512); T2 was level with T1, and 2 or 8 KB ahead no better than 4.
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
  for (int64_t o = 0; o < bytes; o += 64) _mm_prefetch(c + o, _MM_HINT_T1);
#else
  (void)p;
  (void)bytes;
#endif
}

}  // namespace kvc
