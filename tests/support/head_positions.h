#pragma once
// Per-head positions of a layer's cache, whatever its layout (dense or ragged): what eviction tests
// compare after a press has acted.
#include <vector>

#include <ATen/ATen.h>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"

namespace kvc::test {

inline std::vector<at::Tensor> head_positions(const LayerCache& layer) {
  std::vector<at::Tensor> out;
  if (const auto* d = dynamic_cast<const DenseLayerCache*>(&layer)) {
    for (int64_t h = 0; h < d->positions().size(0); ++h) out.push_back(d->positions()[h].clone());
  } else if (const auto* r = dynamic_cast<const RaggedLayerCache*>(&layer)) {
    for (int64_t h = 0; h + 1 < r->indptr().numel(); ++h) out.push_back(r->head_positions(h).clone());
  }
  return out;
}

}  // namespace kvc::test
