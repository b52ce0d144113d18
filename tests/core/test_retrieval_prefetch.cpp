// Next-layer prefetch changes reads and timing, never what is attended: the same tokens through a
// cache with prefetch on and one with it off give bit-identical logits, recall, clusters and cache
// behaviour, while some demand reads are served by the read-ahead.
#include <gtest/gtest.h>

#include <sstream>

#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/paths.h"
#include "support/retrieval_side.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

using Side = test::RetrievalSide;

// Cluster ids, sizes and stored content of every (layer, head), as one comparable text.
std::string cluster_state(Side& s) {
  std::ostringstream out;
  for (int64_t l = 0; l < s.cache->num_layers(); ++l) {
    auto& layer = dynamic_cast<RetrievalLayerCache&>(s.cache->layer(l));
    for (const auto& h : layer.heads())
      for (const auto& c : h.clusters()) {
        out << l << ":" << c.uid << ":" << c.stats.n << ":" << c.delayed.size() << "[";
        const std::vector<EntryBlock> read = s.shared->store->read({c.uid});  // named: outlives the loop
        for (int64_t p : read.front().positions) out << p << " ";
        out << "] ";
      }
  }
  return out.str();
}

class Prefetch : public ::testing::TestWithParam<std::string> {};

TEST_P(Prefetch, ChangesReadsNotOutputs) {
  const auto model = LlamaModel::load(test::model_dir("stories260K"));
  // 400 prompt tokens and clusters of ~64 entries: clusters span full pages (56 records of
  // head_dim 8), so there is something on storage to read ahead. Any tokens do: outputs are compared.
  const std::vector<int> tokens = test::lcg_tokens(*model, 460, 12345);
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 400);
  Side off = test::make_retrieval_side(*model, GetParam()),
       on = test::make_retrieval_side(*model, GetParam() + ",prefetch=1");
  ForwardOptions last;
  last.all_logits = false;
  ASSERT_TRUE(at::equal(model->forward(prompt, *off.cache, last), model->forward(prompt, *on.cache, last)));
  for (size_t t = prompt.size(); t < tokens.size(); ++t) {
    const at::Tensor a = model->forward({tokens[t]}, *off.cache, last),
                     b = model->forward({tokens[t]}, *on.cache, last);
    ASSERT_TRUE(at::equal(a, b)) << "step " << t << ": max diff " << (a - b).abs().max().item<float>();
  }
  EXPECT_EQ(off.shared->recall_sum, on.shared->recall_sum);
  EXPECT_EQ(off.shared->retrieved_entries, on.shared->retrieved_entries);
  EXPECT_EQ(off.shared->splits, on.shared->splits);
  EXPECT_EQ(off.shared->cache->counters().lookups, on.shared->cache->counters().lookups);
  EXPECT_EQ(off.shared->cache->counters().hits, on.shared->cache->counters().hits);
  EXPECT_EQ(cluster_state(off), cluster_state(on));
  const PrefetchCounters& pf = on.shared->prefetch->counters();
  EXPECT_GT(pf.issued, 0);
  EXPECT_GT(pf.used, 0) << "no demand read was served by the read-ahead";
  EXPECT_LE(pf.used + pf.stale, pf.issued);
  EXPECT_EQ(off.shared->prefetch, nullptr);
}

// tau_scale=0 splits on every new entry, so prefetched clusters often change before use (stale path).
INSTANTIATE_TEST_SUITE_P(Strategies, Prefetch,
                         ::testing::Values("adaptive:csize=64,budget=128,cache_kb=8",
                                           "adaptive:csize=64,budget=128,cache_kb=8,tau_scale=0,bmax=4",
                                           "static:csize=64,budget=128,cache_kb=8",
                                           "local:csize=64,budget=128,cache_kb=8,every=8",
                                           "none:budget=64,cache_kb=8"));

TEST(Prefetch, NeedsTheIoThread) { EXPECT_THROW(RetrievalConfig::parse("adaptive:async=0,prefetch=1"), Error); }

}  // namespace
}  // namespace kvc::retrieval
