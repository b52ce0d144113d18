#pragma once
// Attention of one decoding token over a cache's dense per-KV-head entries on CPU (fp32 queries; keys
// and values stored in fp32, bf16, f16, Q8_0 or Q4_0, widened in registers, never copied): scores,
// position mask, softmax and the weighted sum of values in two streaming passes (keys, then values),
// parallel over chunks of each KV head's entries whose softmax partials are merged at the end, so that
// one KV head still uses every thread. At long context decode is bound by reading the cache; the
// generic path ran these tiny batched products single-threaded and synchronised on the positions
// every step.
#include <ATen/ATen.h>

namespace kvc {

// queries [H, 1, d] (rotated); keys/values [KV, S, w] with contiguous rows of d values in the format
// `key_type` / `value_type` (row_formats.h; w = stored_row_width; Undefined: the tensor's own dtype,
// w = d); key_positions [KV, S] int64. Entry s of a head is visible iff key_position <= q_position and, with a sliding
// window W > 0, key_position > q_position - W. Returns [H, 1, d], or an undefined tensor when the fast path does not
// apply (dtype, device, layout, no AVX2): the caller then uses the LibTorch path. With `probabilities` non-null it also
// receives the attention weights [H, S] (fp32): what a decoding-time eviction method (H2O, TOVA) scores entries by.
at::Tensor fast_decode_attention(const at::Tensor& queries, int64_t q_position, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                 at::Tensor* probabilities = nullptr,
                                 at::ScalarType key_type = at::ScalarType::Undefined,
                                 at::ScalarType value_type = at::ScalarType::Undefined);

}  // namespace kvc
