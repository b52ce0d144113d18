#pragma once
// D2O's merge of evicted entries into kept ones (Wan et al. 2024), apart from its press so that tests
// can check it on a cache of their own; the press itself registers through register_method.
#include <ATen/ATen.h>

#include "cache/layer_cache.h"

namespace kvc {

// D2O's merge of the entries not in `keep` into kept ones, in place; the caller then
// evicts them as for any press. The cache must support merging (MergeableRows). threshold is
// the layer's EMA state (<0 unset); with ema = false it is a fixed cosine that no merge updates (−∞:
// every evicted entry merges). `merged`, when given, receives one row (head, evicted slot, slot merged
// into) per merge.
void d2o_merge(LayerCache& cache, const at::Tensor& keep, double beta, double& threshold, at::Tensor* merged = nullptr,
               bool ema = true);
// The same merge for a decode step (one evicted entry per head, `keep` [kv, s - 1] ascending) in tensor
// operations alone, the threshold a 0-dim float64 tensor beside the keys: on a GPU the host never waits.
void d2o_merge_one_per_head_on_device(LayerCache& cache, const at::Tensor& keep, double beta, at::Tensor& threshold,
                                      at::Tensor* merged = nullptr, bool ema = true);

}  // namespace kvc
