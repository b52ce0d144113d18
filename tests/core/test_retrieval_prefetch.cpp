// Next-layer prefetch changes reads and timing, never what is attended: the same tokens through a
// cache with prefetch on and one with it off give bit-identical logits, recall, clusters and cache
// behaviour, while some demand reads are served by the read-ahead.
#include <gtest/gtest.h>

#include <sstream>

#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::retrieval {
namespace {

struct Side {
  std::shared_ptr<RetrievalShared> shared;
  std::unique_ptr<KVCache> cache;
};

Side make_side(const LlamaModel& model, const std::string& spec) {
  const ModelConfig& mc = model.config();
  const AttentionShape shape = mc.attention_shape();
  Side s;
  s.shared = make_retrieval_shared(RetrievalConfig::parse(spec), RecordFormat{mc.head_dim},
                                   test::make_temp_dir("kvc-prefetch") + "/store.kvs", true);
  s.cache = std::make_unique<KVCache>(model.new_cache(retrieval_layer_factory(shape, model.rope(), s.shared)));
  return s;
}

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
  std::vector<int> tokens{model->config().bos_token_id};
  uint64_t x = 12345;
  while (tokens.size() < 460) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    tokens.push_back(3 + static_cast<int>((x >> 33) % (model->config().vocab_size - 3)));
  }
  const std::vector<int> prompt(tokens.begin(), tokens.begin() + 400);
  Side off = make_side(*model, GetParam()), on = make_side(*model, GetParam() + ",prefetch=1");
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
