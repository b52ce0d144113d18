#pragma once
// The attention geometry of a layer, shared by the model, the caches and the kernels.
#include <cstdint>

namespace kvc {

struct AttentionShape {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t sliding_window = 0;  // 0: none
};

}  // namespace kvc
