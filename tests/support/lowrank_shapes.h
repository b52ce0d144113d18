#pragma once
// The small attention shape the low-rank cache tests share: 4 query heads over 2 KV heads of 4 dimensions.
#include <cstdint>

#include "core/model_config.h"

namespace kvc::test {

constexpr int64_t kLowRankKvHeads = 2, kLowRankHeadDim = 4, kLowRankHeads = 4;

inline ModelConfig lowrank_test_config() {
  ModelConfig c;
  c.num_heads = kLowRankHeads;
  c.num_kv_heads = kLowRankKvHeads;
  c.head_dim = kLowRankHeadDim;
  c.hidden_size = kLowRankHeads * kLowRankHeadDim;
  c.max_position_embeddings = 256;
  return c;
}

}  // namespace kvc::test
