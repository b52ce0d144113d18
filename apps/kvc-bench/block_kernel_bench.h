#pragma once
// kvc-bench --block-kernels: the block kernels (lib/kernels/block_*.h) on random blocks of every format,
// each form and instruction-set level in turn: matrix-vector products from memory (a matrix several
// times the last-level cache) and from cache (compute-bound), and prefill products against the fp32
// path (the dequantized matrix through parallel_linear); and decode attention over f16 caches at each
// level.
#include <nlohmann/json.hpp>

#include <cstdio>

namespace kvc::bench {

// `repeats` alternated rounds; medians reported. `tokens`: the prefill products' input rows.
nlohmann::json compare_block_kernels(int repeats, int64_t tokens, FILE* table);

}  // namespace kvc::bench
