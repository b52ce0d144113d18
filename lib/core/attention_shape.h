#pragma once
// The head layout of one layer's attention, shared by the model's configuration, the caches and the
// compression methods. Torch-free, so that the configuration can hand it out.
#include <cstdint>

namespace kvc {

struct AttentionShape {
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t sliding_window = 0;  // 0: none

  // Query heads per KV head (grouped-query attention): query head h reads KV head h / group_size().
  int64_t group_size() const { return num_heads / num_kv_heads; }
};

}  // namespace kvc
