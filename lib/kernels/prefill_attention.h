#pragma once
// Causal attention of many query tokens (prefill) over a cache's dense per-KV-head entries, fp32 on
// CPU, (KV head, query block) pairs in parallel: for a block of queries, scores = Q K^T with single-threaded BLAS,
// then a fused scale + position mask + softmax pass in place, then P V. The score block stays in
// cache, the mask is never materialised, and entries past the block's last position are skipped.
// The generic batched path ran its small-K products at a fraction of the GEMM peak.
#include <ATen/ATen.h>

namespace kvc {

// queries [H, T, d] (rotated); q_positions [T] int64; keys/values [KV, S, d] with contiguous rows;
// key_positions [KV, S] int64. Visibility as in decode: key_position <= q_position and, with a
// sliding window W > 0, key_position > q_position - W. Returns [H, T, d], or an undefined tensor when
// the fast path does not apply (the caller then uses the LibTorch path).
at::Tensor fast_prefill_attention(const at::Tensor& queries, const at::Tensor& q_positions, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window);

}  // namespace kvc
