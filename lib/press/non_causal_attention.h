#pragma once
// Non-causal chunked attention (Chari & Van Durme 2025, Compactor, arXiv:2507.08143): within each chunk of
// the prompt every query attends to every key of the chunk; a key's score is the attention it receives.
#include <ATen/ATen.h>

#include "press/press.h"

namespace kvc {

// queries [n_heads, S, d] and keys [n_kv, S, d] (both rotated), values [n_kv, S, d] -> [n_kv, S] float64:
// per chunk of `chunk` positions (the last one shorter), softmax(q·k) over the chunk's keys (unscaled
// logits, as kvpress), summed over the chunk's queries; query heads aggregated onto KV heads (`agg`),
// times ‖v‖, average-pooled over 3 neighbours (zero padding at the ends).
at::Tensor non_causal_attention(const at::Tensor& queries, const at::Tensor& keys, const at::Tensor& values,
                                int64_t chunk, HeadAgg agg);

}  // namespace kvc
