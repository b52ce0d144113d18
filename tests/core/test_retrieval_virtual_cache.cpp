// virtual=1 (DynaKV's Pipeline 2) moves where the cached clusters live, never what is attended: a cache
// of cache_kb per layer whose layers park their clusters between steps behaves exactly as the same
// per-layer caches all kept in RAM (same lookups, hits and outputs), while RAM holds one layer's.
#include <gtest/gtest.h>

#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/paths.h"
#include "support/retrieval_side.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

using Side = test::RetrievalSide;

Side make_side(const LlamaModel& model, const std::string& spec, bool park) {
  Side s = test::make_retrieval_side(model, spec);
  if (!park) s.shared->virtualizer.reset();  // the reference: every layer's cache stays in RAM
  return s;
}

class VirtualCache : public ::testing::TestWithParam<std::string> {};

TEST_P(VirtualCache, ParksLayersWithoutChangingTheCache) {
  const auto model = LlamaModel::load(test::model_dir("stories260K"));
  const std::vector<int> tokens = test::lcg_tokens(*model, 460, 4242);
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 400);
  const std::string spec = GetParam() + ",virtual=1";
  // Which clusters are in RAM decides when adaptive splits (now, or delayed until read), so the
  // reference is the same per-layer caches, not the default model-wide one.
  Side kept = make_side(*model, spec, false), parked = make_side(*model, spec, true);
  ForwardOptions last;
  last.all_logits = false;
  ASSERT_TRUE(at::equal(model->forward(prompt, *kept.cache, last), model->forward(prompt, *parked.cache, last)));
  for (size_t t = prompt.size(); t < tokens.size(); ++t) {
    const at::Tensor a = model->forward({tokens[t]}, *kept.cache, last);
    ASSERT_TRUE(at::equal(model->forward({tokens[t]}, *parked.cache, last), a)) << "step " << t;
  }
  const CacheCounters& k = kept.shared->cache->counters();
  const CacheCounters& v = parked.shared->cache->counters();
  EXPECT_EQ(v.lookups, k.lookups);
  EXPECT_EQ(v.hits, k.hits);
  EXPECT_EQ(v.evictions, k.evictions);
  const VirtualCacheCounters& c = parked.shared->virtualizer->counters();
  EXPECT_GT(c.restored, 0);
  EXPECT_EQ(c.stale, 0) << "nothing writes a layer's clusters between its read back and its step";
  EXPECT_GE(c.parked, c.restored);
  // RAM: one layer's cache (a cluster put may overshoot it until the eviction that follows), against all
  // of them in the reference.
  const int64_t capacity = parked.shared->config.cache_kb * 1024;
  EXPECT_LE(v.peak_bytes, 2 * capacity);
  EXPECT_GT(k.peak_bytes, 2 * capacity);
}

// 8 KiB per layer fills on every layer; tau_scale=0 splits on every entry (clusters rewritten in RAM).
INSTANTIATE_TEST_SUITE_P(Strategies, VirtualCache,
                         ::testing::Values("adaptive:csize=8,budget=64,cache_kb=8",
                                           "adaptive:csize=8,budget=64,cache_kb=8,tau_scale=0,bmax=4",
                                           "static:csize=8,budget=64,cache_kb=8,async=0",
                                           "local:csize=8,budget=64,cache_kb=8,every=8,centroids=storage",
                                           "none:budget=64,cache_kb=8"));

TEST(VirtualCache, ReadsBackInsteadOfPrefetch) {
  EXPECT_THROW(RetrievalConfig::parse("adaptive:virtual=1,prefetch=1"), Error);
  EXPECT_TRUE(RetrievalConfig::parse("pq:virtual=1").virtual_cache);
}

}  // namespace
}  // namespace kvc::retrieval
