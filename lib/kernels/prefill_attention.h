#pragma once
// Causal attention of many query tokens (prefill) over a cache's dense per-KV-head entries, fp32 on
// CPU, FlashAttention-style: keys packed once per KV head into 16-key panels; (query head, block of
// 24 queries) tasks in parallel; per chunk of 128 keys, register-tiled Q K^T (kernels/attention_tiles.h),
// position mask and online softmax in L1, then P V accumulated into the outputs. Score rows never
// exist in full, the mask is never materialised, and keys outside a tile's visible span are skipped.
// It replaced BLAS products per query block, whose inner size of 64 and per-block repacking of the
// keys kept them well below the GEMM rate.
//
// The same pass also yields the attention statistics compression methods score entries with: a block
// keeps its exponentiated scores for every chunk (24 rows x the visible keys) with each row's running
// maximum per chunk, so once a row's normaliser is final its probabilities follow by one scale per
// chunk; no score is computed twice.
#include <ATen/ATen.h>

namespace kvc {

// Statistics of a prefill's attention probabilities, float32, entries in storage order.
struct PrefillStatistics {
  bool want_column_sums = false;  // asks for column_sums
  int64_t window = 0;             // asks for the probability rows of the last `window` queries (<= T)
  at::Tensor column_sums;         // [H, S]: Σ over queries of each entry's probability
  at::Tensor window_probs;        // [H, window, S]; entries a query cannot see are 0
};

// queries [H, T, d] (rotated); q_positions [T] int64; keys/values [KV, S, d] with contiguous rows, d a
// multiple of 8; key_positions [KV, S] int64. Visibility as in decode: key_position <= q_position and, with a
// sliding window W > 0, key_position > q_position - W. Returns [H, T, d], or an undefined tensor when
// the fast path does not apply (the caller then uses the LibTorch path). With `statistics`, also fills
// what it asks for. Column sums are added in a fixed order, so they do not depend on the thread count.
at::Tensor fast_prefill_attention(const at::Tensor& queries, const at::Tensor& q_positions, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                  PrefillStatistics* statistics = nullptr);

}  // namespace kvc
