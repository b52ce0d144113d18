#pragma once
// CaM's merge (Zhang et al., ICML 2024, "CaM: Cache Merging for Memory-efficient LLMs Inference"; kvpress'
// CAMPress): before a decoding compression cuts a layer, the evicted entries the scorer ranks highest fold
// their values into the kept entries that follow them, each with the probability its received attention
// bears to theirs, so that what the cut removes still reaches later queries.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc {

struct CamMergeInputs {
  at::Tensor mean_scores;  // [S] the base scorer's scores averaged over KV heads (one selection for every head)
  at::Tensor kept;         // [target] storage indices the cut keeps, ascending
  at::Tensor attention;    // [n_kv, S] attention each entry received from the queries decoded so far
  at::Tensor positions;    // [n_kv, S] int64 token positions (what a merge's random draw is keyed on)
  int64_t candidates = 0;  // evicted entries that may merge: the decode passes since the last compression
  int64_t window = 32;     // kept entries after a candidate that share its value
  uint64_t seed = 0;
  int64_t layer = 0;
};

// Adds the merged values into `values` [n_kv, S, d] (writable, any floating type) in place: candidate c,
// one of the `candidates` evicted entries with the highest mean score (ties: the later entry), merges into
// the next `window` kept entries w after it with probability p = clamp(A[c] / mean_w A[w], 0, 1) per
// head (0/0 = 0, x/0 = 1), each receiving value[c] / |w|. The draw is keyed_draw(seed, layer, head, position) < p
// (press/keyed_draw.h) (a hash: reproducible, where kvpress draws from torch's global generator).
void cam_merge(const CamMergeInputs& in, const at::Tensor& values);

}  // namespace kvc
