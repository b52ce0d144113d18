// The shared battery every registered press runs through, plus checks of the pieces (selection,
// allocation, bounded decoding; the caches themselves: test_layer_caches.cpp) against independent expectations.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <set>
#include <thread>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "compression/compression_spec.h"
#include "generation/aten_op_counter.h"
#include "generation/generation.h"
#include "generation/interleaved_decode.h"
#include "harness/sample_runner.h"
#include "harness/shared_prefill.h"
#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "press/d2o.h"
#include "press/kept_dump.h"
#include "press/press.h"
#include "press/press_observer.h"
#include "press/press_registry.h"
#include "press/tracked_rows.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/press_names.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
namespace {

const LlamaModel& model() {
  static auto m = LlamaModel::load(test::model_dir("stories260K"));
  return *m;
}

// The same model in float64: its attention always takes the generic path that also records
// statistics, so runs with and without a press can be compared bit for bit (in fp32 the fused
// kernels and the statistics path round differently in the last bits).
const LlamaModel& exact_model() {
  static auto m = [] {
    LoadOptions options;
    options.dtype = "float64";
    return LlamaModel::load(test::model_dir("stories260K"), options);
  }();
  return *m;
}

// A natural-text prompt (real attention patterns), BOS first.
std::vector<int> prompt(int64_t n) {
  static const std::vector<int> ids = [] {
    const Tokenizer tok = Tokenizer::load(test::model_dir("stories260K") + "/tokenizer.model");
    return tok.encode_prompt(test::slurp(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 6000));
  }();
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

// The presses held to the ratio contract below (budget, untouched positions and keys); key_rerotation and
// finch move their kept entries to new positions by design (test_press_reconstruction.cpp checks it).
std::vector<std::string> presses() {
  std::vector<std::string> names;
  for (const auto& n : test::ratio_presses())
    if (!test::rerotates_keys(n)) names.push_back(n);
  return names;
}

CacheSetup setup_for(const std::string& press, double ratio, int64_t budget = 0, const LlamaModel& m = model()) {
  CompressionSpec spec;
  spec.press = press;
  spec.ratio = ratio;
  spec.budget = budget;
  return build_cache_setup(spec, m);
}

using test::head_positions;

at::Tensor head_keys(const LayerCache& layer, int64_t h) {
  if (const auto* d = dynamic_cast<const DenseLayerCache*>(&layer)) return d->keys()[h];
  return dynamic_cast<const RaggedLayerCache&>(layer).head_keys(h);
}

struct PressRun {
  std::vector<at::Tensor> logits;  // prefill last row, then each decode step
  KVCache cache;
  CacheFootprint after_prefill;
};

// Prefill `ids`, then decode `steps` tokens of the text that follows (teacher forcing, so that every
// run sees the same tokens and their distributions are comparable).
PressRun run(const CacheSetup& setup, const std::vector<int>& ids, int64_t steps, const LlamaModel& m = model()) {
  const std::vector<int> text = prompt(static_cast<int64_t>(ids.size()) + steps);
  PressRun r{{}, setup.new_cache(m), {}};
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  r.logits.push_back(m.forward(ids, r.cache, o));
  r.after_prefill = r.cache.footprint();
  for (int64_t i = 0; i < steps; ++i) {
    r.logits.push_back(m.forward({text[ids.size() + static_cast<size_t>(i)]}, r.cache, o));
  }
  return r;
}

constexpr int64_t kPrompt = 160;

TEST(TrackedRows, AppendAndReorderMatchCatAndGather) {
  // A decode loop's bookkeeping: append a column, evict one entry per row (the last fills the slot, as
  // the dense cache does), sometimes keep a subset; against cat + gather on fresh tensors.
  at::manual_seed(4);
  const int64_t rows = 3;
  at::Tensor expect = at::randint(0, 1000, {rows, 10}, at::kLong);
  TrackedRows tracked;
  tracked.assign(expect);
  for (int step = 0; step < 200; ++step) {
    const at::Tensor column = at::randint(0, 1000, {1}, at::kLong);
    expect = at::cat({expect, column.expand({rows, 1})}, 1);
    tracked.append(column);
    const int64_t n = expect.size(1);
    at::Tensor order;
    if (step % 50 == 49) {  // keep a sorted random subset of 5
      order =
          std::get<0>(at::randperm(n, at::kLong).narrow(0, 0, 5).sort()).unsqueeze(0).expand({rows, 5}).contiguous();
    } else {
      order = at::arange(n - 1, at::kLong).unsqueeze(0).repeat({rows, 1});
      for (int64_t h = 0; h < rows; ++h) {
        const int64_t slot = at::randint(0, n, {1}).item<int64_t>();
        if (slot < n - 1) order[h][slot] = n - 1;
      }
    }
    expect = expect.gather(1, order);
    if (step % 2 == 0 && order.size(1) == n - 1) {
      // A single eviction per row, as swap_remove does it: the freed slot is where the last entry went.
      std::vector<int64_t> slots(static_cast<size_t>(rows), n - 1);
      for (int64_t h = 0; h < rows; ++h)
        for (int64_t i = 0; i < n - 1; ++i)
          if (order[h][i].item<int64_t>() == n - 1) slots[static_cast<size_t>(h)] = i;
      tracked.swap_remove(slots);
    } else {
      tracked.reorder(order);
    }
    ASSERT_TRUE(at::equal(tracked.view(), expect)) << "step " << step;
  }
  TrackedRows sums;
  sums.assign(at::zeros({rows, 2}, at::kDouble));
  sums.append_zeros(3);
  sums.view().add_(1.5);
  EXPECT_TRUE(at::equal(sums.view(), at::full({rows, 5}, 1.5, at::kDouble)));
}

// The decode step's one-pass aggregation equals aggregate_heads (a reshape and a mean or max over each
// KV head's group), written into or added to rows that lie apart as the bookkeeping's buffer keeps them.
TEST(AggregateHeads, IntoStridedRowsMatchesTheTensorVersion) {
  at::manual_seed(6);
  for (const int64_t kv : {1, 2, 3, 6}) {
    for (const HeadAgg agg : {HeadAgg::Mean, HeadAgg::Max}) {
      for (const bool accumulate : {false, true}) {
        const at::Tensor per_query_head = at::rand({6, 11}, at::kFloat);
        const at::Tensor buffer = at::rand({kv, 16}, at::kDouble);
        const at::Tensor into = buffer.narrow(1, 0, 9), before = into.clone(), spare = buffer.narrow(1, 9, 7).clone();
        aggregate_heads_into(per_query_head, agg, into, accumulate);
        const at::Tensor expect =
            aggregate_heads(per_query_head, kv, agg).narrow(1, 0, 9) + (accumulate ? before : at::zeros_like(before));
        EXPECT_TRUE(at::allclose(into, expect, 1e-14, 0)) << "kv " << kv << " accumulate " << accumulate;
        EXPECT_TRUE(buffer.narrow(1, 9, 7).equal(spare)) << "wrote past the rows";
      }
    }
  }
}

TEST(ProtectEnds, MatchesASortOfEachRow) {
  // The r newest entries (by position) score position + kProtected, the k oldest 2·kProtected, the rest
  // keep their importance; brute force by sorting each row's positions.
  at::manual_seed(5);
  for (const auto& [sinks, recent] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {4, 0}, {0, 7}, {3, 9}, {50, 50}}) {
    const int64_t rows = 6, s = 40;
    const at::Tensor importance = at::rand({rows, s}, at::kDouble);
    // The last row as a bounded cache holds it: runs of consecutive positions at both ends (which it
    // never evicts), gaps between them, in no order.
    const at::Tensor ends_kept = at::cat({at::arange(12, at::kLong), at::randperm(60, at::kLong).narrow(0, 0, 16) + 20,
                                          at::arange(88, 100, at::kLong)})
                                     .index_select(0, at::randperm(s, at::kLong));
    const at::Tensor positions =
        at::stack({at::randperm(100, at::kLong).narrow(0, 0, s), at::randperm(100, at::kLong).narrow(0, 0, s),
                   at::randperm(100, at::kLong).narrow(0, 0, s), at::arange(s, at::kLong), ends_kept,
                   at::arange(s, at::kLong) - 20});  // below zero: the general path
    const at::Tensor out = protect_ends(importance, sinks, recent, positions);
    // Rows read where they lie (apart by a buffer's capacity, as the bookkeeping keeps them) give the same.
    const at::Tensor wide_importance = at::zeros({rows, s + 8}, at::kDouble),
                     wide_positions = at::zeros({rows, s + 8}, at::kLong);
    wide_importance.narrow(1, 0, s).copy_(importance);
    wide_positions.narrow(1, 0, s).copy_(positions);
    ASSERT_TRUE(
        protect_ends(wide_importance.narrow(1, 0, s), sinks, recent, wide_positions.narrow(1, 0, s)).equal(out));
    for (int64_t h = 0; h < rows; ++h) {
      std::vector<int64_t> sorted(positions[h].data_ptr<int64_t>(), positions[h].data_ptr<int64_t>() + s);
      std::sort(sorted.begin(), sorted.end());
      for (int64_t i = 0; i < s; ++i) {
        const int64_t p = positions[h][i].item<int64_t>();
        const int64_t rank = std::lower_bound(sorted.begin(), sorted.end(), p) - sorted.begin();  // 0 = oldest
        double expect = importance[h][i].item<double>();
        if (rank >= s - std::min(recent, s)) expect = p + kProtected;
        if (rank < std::min(sinks, s)) expect = 2 * kProtected;
        ASSERT_EQ(out[h][i].item<double>(), expect) << "sinks " << sinks << " recent " << recent << " row " << h;
      }
    }
  }
}

TEST(PressBattery, RegistryHasEveryMethod) {
  const auto names = presses();
  for (const char* want : {"streaming_llm",
                           "h2o",
                           "tova",
                           "snapkv",
                           "pyramidkv",
                           "knorm",
                           "random",
                           "dynamickv",
                           "d2o",
                           "kvcompose",
                           "kvcompose_unstructured",
                           "ada",
                           "keydiff",
                           "expected_attention",
                           "lagkv",
                           "leverage",
                           "non_causal_attention",
                           "cur",
                           "compactor",
                           "criticalkv",
                           "cap",
                           "qfilter",
                           "adakv",
                           "criticalkv_ada",
                           "chunk",
                           "block",
                           "chunkkv",
                           "merging"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
  }
}

TEST(PressBattery, BudgetRespectedExactlyAndMemoryReduced) {
  const auto& c = model().config();
  const PressRun full = run(CacheSetup{}, prompt(kPrompt), 0);
  for (const auto& name : presses()) {
    for (double ratio : {0.25, 0.5, 0.75}) {
      SCOPED_TRACE(name + " ratio " + std::to_string(ratio));
      const CacheSetup setup = setup_for(name, ratio);
      const PressRun r = run(setup, prompt(kPrompt), 0);
      const int64_t budget = std::llround((1 - ratio) * kPrompt);
      // A bounded cache keeps one spare slot per head for the token being added.
      const int64_t spare = setup.bounded ? c.num_kv_heads * (2 * c.head_dim * 4 + 8) : 0;
      // Allocators move budget between layers and heads but never change the total.
      EXPECT_EQ(r.after_prefill.entries, budget * c.num_layers * c.num_kv_heads);
      // Bytes measured by the caches: payload is exactly what is kept, and resident memory shrank.
      EXPECT_EQ(r.after_prefill.payload_bytes, r.after_prefill.entries * 2 * c.head_dim * 4);
      // Per-head layouts add their bookkeeping: start, length and capacity of each KV head.
      const int64_t bookkeeping = 3 * c.num_kv_heads * 8;
      EXPECT_LE(r.after_prefill.resident_bytes, static_cast<int64_t>(full.after_prefill.resident_bytes * (1 - ratio)) +
                                                    (bookkeeping + spare) * c.num_layers);
    }
  }
}

TEST(PressBattery, PositionsPreservedAndKeysUntouched) {
  const PressRun full = run(CacheSetup{}, prompt(kPrompt), 0, exact_model());
  for (const auto& name : presses()) {
    SCOPED_TRACE(name);
    const PressRun r = run(setup_for(name, 0.5, 0, exact_model()), prompt(kPrompt), 0, exact_model());
    for (int64_t l = 0; l < model().config().num_layers; ++l) {
      const auto heads = head_positions(r.cache.layer(l));
      ASSERT_EQ(static_cast<int64_t>(heads.size()), model().config().num_kv_heads);
      for (int64_t h = 0; h < static_cast<int64_t>(heads.size()); ++h) {
        const at::Tensor p = heads[static_cast<size_t>(h)];
        // Kept entries keep their own positions, in order, without duplicates.
        if (p.numel() > 1)
          EXPECT_TRUE((p.narrow(0, 1, p.numel() - 1) > p.narrow(0, 0, p.numel() - 1)).all().item<bool>());
        if (p.numel() > 0) EXPECT_TRUE(p.min().item<int64_t>() >= 0 && p.max().item<int64_t>() < kPrompt);
        // ...and the exact rotated key of that position (D2O merges, so its keys are blends).
        if (name != "d2o") {
          const at::Tensor expected = head_keys(full.cache.layer(l), h).index_select(0, p);
          EXPECT_TRUE(head_keys(r.cache.layer(l), h).equal(expected)) << "layer " << l << " head " << h;
        }
      }
    }
  }
}

TEST(PressBattery, FullBudgetGivesIdenticalLogits) {
  const PressRun full = run(CacheSetup{}, prompt(kPrompt), 6, exact_model());
  for (const auto& name : presses()) {
    SCOPED_TRACE(name);
    // A press without a size is refused (it would compress nothing); a budget equal to the prompt
    // keeps everything: the press must be a no-op.
    EXPECT_THROW(setup_for(name, 0.0, 0, exact_model()), Error);
    for (const int64_t budget : {kPrompt}) {
      const CacheSetup setup = setup_for(name, 0.0, budget, exact_model());
      const PressRun r = run(setup, prompt(kPrompt), 6, exact_model());
      ASSERT_EQ(r.logits.size(), full.logits.size());
      // A bounded press held to the prompt length evicts from the second decode step on (its cache
      // then stops growing); until then, and always for the others, logits are bit-identical.
      const size_t exact = setup.bounded ? 2 : r.logits.size();
      for (size_t i = 0; i < exact; ++i) EXPECT_TRUE(r.logits[i].equal(full.logits[i])) << "step " << i;
      // Bounded is what the method declares (its PressConfig), for any press that is given a size.
      EXPECT_EQ(setup.bounded, build_method_config(PressParams::parse(name)).bounded);
    }
  }
}

TEST(PressBattery, DecodingContinuesAfterCompression) {
  const auto& c = model().config();
  const PressRun full = run(CacheSetup{}, prompt(kPrompt), 8);
  for (const auto& name : presses()) {
    SCOPED_TRACE(name);
    const CacheSetup setup = setup_for(name, 0.5);
    const PressRun r = run(setup, prompt(kPrompt), 8);
    EXPECT_EQ(r.cache.next_position(), kPrompt + 8);
    const int64_t per_step = c.num_layers * c.num_kv_heads;
    // Bounded presses hold the prefill size; the others grow by one entry per head per step.
    EXPECT_EQ(r.cache.footprint().entries, r.after_prefill.entries + (setup.bounded ? 0 : 8 * per_step));
    for (const auto& l : r.logits) EXPECT_TRUE(at::isfinite(l).all().item<bool>());
    // Keeping half of a natural-text prompt should still predict something like the full model:
    // a weak but real check that positions and rotations are right (a broken RoPE gives garbage).
    int agree = 0;
    double kl = 0;
    for (size_t i = 0; i < r.logits.size(); ++i) {
      const at::Tensor p = at::softmax(full.logits[i][0], -1), q = at::log_softmax(r.logits[i][0], -1);
      agree += full.logits[i][0].argmax().item<int64_t>() == r.logits[i][0].argmax().item<int64_t>();
      kl += (p * (p.log() - q)).sum().item<double>() / static_cast<double>(r.logits.size());
    }
    // Thresholds a broken cache fails by far (mean KL ~10 nats, no agreement), loose enough for knorm
    // and random, the weakest methods here, on a 260K-parameter model.
    EXPECT_LT(kl, 2.0);
    EXPECT_GE(agree, 4);
    std::printf("  %-24s mean KL %.3f, top-1 agreement %d/%zu\n", name.c_str(), kl, agree, r.logits.size());
  }
}

TEST(PressBattery, DeterministicWithSeed) {
  for (const auto& name : presses()) {
    SCOPED_TRACE(name);
    const PressRun a = run(setup_for(name, 0.5), prompt(kPrompt), 4), b = run(setup_for(name, 0.5), prompt(kPrompt), 4);
    for (size_t i = 0; i < a.logits.size(); ++i) EXPECT_TRUE(a.logits[i].equal(b.logits[i]));
    for (int64_t l = 0; l < model().config().num_layers; ++l) {
      const auto pa = head_positions(a.cache.layer(l)), pb = head_positions(b.cache.layer(l));
      for (size_t h = 0; h < pa.size(); ++h) EXPECT_TRUE(pa[h].equal(pb[h]));
    }
  }
  const PressRun s1 = run(setup_for("random:seed=1", 0.5), prompt(kPrompt), 0);
  const PressRun s2 = run(setup_for("random:seed=2", 0.5), prompt(kPrompt), 0);
  EXPECT_FALSE(head_positions(s1.cache.layer(0))[0].equal(head_positions(s2.cache.layer(0))[0]));
}

TEST(PressMethods, StreamingLlmKeepsSinksAndRecentWindow) {
  const int64_t budget = 40;
  const PressRun r = run(setup_for("streaming_llm:sinks=4", 0, budget), prompt(kPrompt), 10);
  // Brute force: positions 0..3, then the most recent budget − 4 of the 170 tokens seen.
  std::vector<int64_t> expected{0, 1, 2, 3};
  // run() makes 10 decode calls after the prompt: 170 tokens have passed through the cache.
  for (int64_t p = kPrompt + 10 - (budget - 4); p < kPrompt + 10; ++p) expected.push_back(p);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    for (const auto& unordered : head_positions(r.cache.layer(l))) {
      // Decoding-time eviction reuses freed slots: storage order is not position order.
      const at::Tensor p = std::get<0>(unordered.sort());
      EXPECT_EQ(std::vector<int64_t>(p.data_ptr<int64_t>(), p.data_ptr<int64_t>() + p.numel()), expected);
    }
  }
}

TEST(PressMethods, BoundedH2OKeepsTheMostRecentWindowWhileDecoding) {
  // Decoding-time eviction reuses freed slots, so "recent" must mean recent positions, not the last
  // storage slots: after 30 steps every head still holds the newest budget / 2 positions.
  const int64_t budget = 40, steps = 30;
  const PressRun r = run(setup_for("h2o:recent=0.5", 0, budget), prompt(kPrompt), steps);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    for (const auto& p : head_positions(r.cache.layer(l))) {
      ASSERT_EQ(p.numel(), budget);
      for (int64_t q = kPrompt + steps - budget / 2; q < kPrompt + steps; ++q) {
        EXPECT_TRUE((p == q).any().item<bool>()) << "layer " << l << " lost recent position " << q;
      }
    }
  }
}

TEST(PressMethods, SnapKVAlwaysKeepsTheWindow) {
  const PressRun r = run(setup_for("snapkv:window=16,kernel=5", 0, 24), prompt(kPrompt), 0);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    for (const auto& p : head_positions(r.cache.layer(l))) {
      ASSERT_EQ(p.numel(), 24);
      EXPECT_TRUE(p.narrow(0, 8, 16).equal(at::arange(kPrompt - 16, kPrompt, at::kLong)));
    }
  }
}

TEST(PressMethods, SharedHeadsGiveIdenticalRows) {
  const PressRun r = run(setup_for("snapkv:heads=shared", 0.5), prompt(kPrompt), 0);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    const auto p = head_positions(r.cache.layer(l));
    for (const auto& h : p) EXPECT_TRUE(h.equal(p[0]));
  }
  EXPECT_THROW(setup_for("ada:heads=shared", 0.5), Error);
}

TEST(PressMethods, LayerAdaptiveBudgetsDiffer) {
  for (const char* name : {"pyramidkv", "kvcompose", "dynamickv", "d2o"}) {
    SCOPED_TRACE(name);
    const PressRun r = run(setup_for(name, 0.5), prompt(kPrompt), 0);
    std::set<int64_t> sizes;
    for (int64_t l = 0; l < model().config().num_layers; ++l)
      sizes.insert(r.cache.layer(l).lengths()[0].item<int64_t>());
    EXPECT_GT(sizes.size(), 1u);
  }
  // PyramidKV: non-increasing with depth.
  const PressRun p = run(setup_for("pyramidkv", 0.5), prompt(kPrompt), 0);
  for (int64_t l = 1; l < model().config().num_layers; ++l) {
    EXPECT_LE(p.cache.layer(l).lengths()[0].item<int64_t>(), p.cache.layer(l - 1).lengths()[0].item<int64_t>());
  }
}

TEST(PressMethods, HeadAdaptiveUsesCsrStorage) {
  for (const char* name : {"ada", "ada:base=h2o", "kvcompose_unstructured"}) {
    SCOPED_TRACE(name);
    const PressRun r = run(setup_for(name, 0.5), prompt(kPrompt), 3);
    bool ragged = false, varied = false;
    for (int64_t l = 0; l < model().config().num_layers; ++l) {
      if (const auto* rc = dynamic_cast<const RaggedLayerCache*>(&r.cache.layer(l))) {
        ragged = true;
        const at::Tensor len = rc->lengths();
        varied |= len.max().item<int64_t>() != len.min().item<int64_t>();
        EXPECT_EQ(rc->indptr()[-1].item<int64_t>(), len.sum().item<int64_t>());
      }
    }
    EXPECT_TRUE(ragged);
    EXPECT_TRUE(varied);
  }
}

TEST(Allocation, DistributeIsExactAndClamped) {
  const auto b = distribute({1, 2, 3, 4}, 100, {0, 0, 0, 0}, {100, 100, 100, 30});
  EXPECT_EQ(std::accumulate(b.begin(), b.end(), int64_t{0}), 100);
  EXPECT_EQ(b[3], 30);
  EXPECT_LE(b[0], b[1]);
  EXPECT_LE(b[1], b[2]);
  const auto z = distribute({0, 0, 0}, 7, {1, 1, 1}, {5, 5, 5});
  EXPECT_EQ(std::accumulate(z.begin(), z.end(), int64_t{0}), 7);
}

TEST(BoundedDecoding, ResidentBytesStayFlatPastTheContext) {
  // 64-token prompt, budget 48 per head, 700 new tokens: past stories260K's 512-token context.
  for (const char* name : {"h2o", "tova", "streaming_llm", "d2o"}) {
    SCOPED_TRACE(name);
    const CacheSetup setup = setup_for(name, 0, 48);
    ASSERT_TRUE(setup.bounded);
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    GenerationRequest req;
    req.prompt = prompt(64);
    req.max_new_tokens = 700;
    req.stop_at_eos = false;
    req.allow_past_context = setup.bounded;
    std::set<int64_t> resident;
    const auto result = generate(
        model(), cache, req, [&](int) { resident.insert(cache.footprint().resident_bytes); }, observer.get());
    EXPECT_EQ(result.stats.generated_tokens, 700);
    EXPECT_EQ(resident.size(), 1u);  // one value for the whole generation
    EXPECT_EQ(result.stats.kv_final.entries, 48 * model().config().num_layers * model().config().num_kv_heads);
    EXPECT_EQ(result.stats.kv_peak_resident_bytes, result.stats.kv_after_prefill.resident_bytes);
  }
}

// The ATen calls a decode step dispatches (its framework overhead) are the same at every step, for the
// uncompressed cache and for every press that evicts while decoding: nothing per step grows with the
// steps taken. And the counter counts what this thread dispatches, k calls as k times one, and by name.
// Decoding several caches step by step in turn (kvc-bench --presses) leaves each sequence as a run of
// its own would: the same greedy tokens as generate() with that cache, uncompressed and evicting.
TEST(BoundedDecoding, InterleavedCachesDecodeAsSeparateRunsDo) {
  const std::vector<int> ids = prompt(kPrompt);
  const int64_t steps = 30;
  const std::vector<std::pair<std::string, CacheSetup>> setups{
      {"none", CacheSetup{}}, {"h2o", setup_for("h2o", 0, 48)}, {"tova", setup_for("tova", 0, 48)}};
  const std::vector<InterleavedRun> runs = interleaved_decode(model(), ids, setups, steps);
  ASSERT_EQ(runs.size(), setups.size());
  for (size_t i = 0; i < setups.size(); ++i) {
    const CacheSetup& setup = setups[i].second;
    KVCache cache = setup.new_cache(model());
    const auto observer = setup.new_observer();
    GenerationRequest request;
    request.prompt = ids;
    request.max_new_tokens = steps + 1;
    request.stop_at_eos = false;
    const GenerationResult alone = generate(model(), cache, request, {}, observer.get());
    EXPECT_EQ(runs[i].name, setups[i].first);
    EXPECT_EQ(runs[i].steps, steps);
    EXPECT_EQ(runs[i].tokens, alone.tokens) << setups[i].first;
    EXPECT_EQ(runs[i].kv.payload_bytes, cache.footprint().payload_bytes) << setups[i].first;
    EXPECT_GT(runs[i].decode_seconds, 0);
  }
  EXPECT_LT(runs[1].kv.resident_bytes, runs[0].kv.resident_bytes);
  EXPECT_THROW(interleaved_decode(model(), ids, setups, 0), Error);
}

TEST(BoundedDecoding, EveryDecodeStepDispatchesTheSameAtenCalls) {
  const at::Tensor a = at::ones({4}), b = at::ones({4});
  const auto count = [&](int calls) {
    AtenOpCounter counter;
    for (int i = 0; i < calls; ++i) (void)at::add(a, b);
    return counter.count();
  };
  ASSERT_GT(count(1), 0);
  EXPECT_EQ(count(0), 0);
  EXPECT_EQ(count(7), 7 * count(1));
  {
    AtenOpCounter counter;
    std::thread([&] { (void)at::add(a, b); }).join();
    EXPECT_EQ(counter.count(), 0);
  }
  {
    AtenOpCounter counter;
    for (int i = 0; i < 3; ++i) (void)at::add(a, b);
    (void)at::mul(a, b);
    const auto by_name = counter.count_by_name();
    int64_t sum = 0;
    for (const auto& [name, calls] : by_name) sum += calls;
    EXPECT_EQ(sum, counter.count());
    EXPECT_EQ(by_name.at("aten::add"), 3 * by_name.at("aten::mul"));
  }
  for (const char* name : {"none", "h2o", "tova", "streaming_llm", "d2o", "snapkv"}) {
    SCOPED_TRACE(name);
    const auto decode_ops = [&](int64_t new_tokens) {
      const CacheSetup setup = setup_for(name, 0, std::string(name) == "none" ? 0 : 48);
      KVCache cache = setup.new_cache(model());
      auto observer = setup.new_observer();
      GenerationRequest req;
      req.prompt = prompt(64);
      req.max_new_tokens = new_tokens;
      req.stop_at_eos = false;
      req.count_ops = true;
      const auto result = generate(model(), cache, req, {}, observer.get());
      EXPECT_EQ(result.stats.generated_tokens, new_tokens);
      int64_t by_name = 0;
      for (const auto& [op, calls] : result.stats.decode_aten_ops_by_name) by_name += calls;
      EXPECT_EQ(by_name, result.stats.decode_aten_ops);
      return result.stats.decode_aten_ops;
    };
    const int64_t a = decode_ops(9), b = decode_ops(17), c = decode_ops(33);
    EXPECT_GT(b - a, 0);
    EXPECT_EQ(c - b, 2 * (b - a)) << a << " " << b << " " << c;
  }
}

// D2O's merge against a brute-force reading of the method: each evicted entry goes to its most similar
// kept entry (cosine of keys) when that similarity clears the threshold (initialised at the mean of the
// per-entry maxima, then an EMA with β), weighted by e^similarity against the kept entry's own e^1;
// keys and values use the same weights; entries below the threshold are dropped.
// Both code paths: many evicted entries (prefill: compared with a copy of the kept ones) and few
// (decoding: compared in place with the evicted ones masked).
TEST(PressMethods, D2OMergeIsSimilarityWeightedWithEmaThreshold) {
  const std::vector<std::vector<int64_t>> kept_sets{{0, 3, 5, 9}, {0, 1, 3, 4, 5, 7, 9}};
  for (const auto& kept : kept_sets) {
    SCOPED_TRACE(kept.size());
    const auto& c = model().config();
    const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
    DenseLayerCache cache(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
    at::manual_seed(5);
    const int64_t n = 10, kv = c.num_kv_heads;
    cache.append(at::randn({kv, n, c.head_dim}), at::randn({kv, n, c.head_dim}), at::arange(n, at::kLong));
    std::vector<int64_t> evicted;
    for (int64_t i = 0; i < n; ++i) {
      if (std::find(kept.begin(), kept.end(), i) == kept.end()) evicted.push_back(i);
    }
    int merged = 0;
    const auto expect_merge = [&](double threshold_before, double beta, double& threshold_after, at::Tensor& k_out,
                                  at::Tensor& v_out) {
      const at::Tensor K = cache.keys().to(at::kDouble), V = cache.values().to(at::kDouble);
      std::vector<std::vector<std::pair<int64_t, double>>> best(static_cast<size_t>(kv));
      double sum = 0;
      for (int64_t h = 0; h < kv; ++h) {
        for (int64_t e : evicted) {
          int64_t target = -1;
          double top = -2;
          for (size_t j = 0; j < kept.size(); ++j) {
            const double cos =
                (at::dot(K[h][e], K[h][kept[j]]) / (K[h][e].norm() * K[h][kept[j]].norm())).item<double>();
            if (cos > top) top = cos, target = static_cast<int64_t>(j);
          }
          best[static_cast<size_t>(h)].push_back({target, top});
          sum += top;
        }
      }
      const double mean = sum / static_cast<double>(kv * static_cast<int64_t>(evicted.size()));
      // D2O Eq. 10: τ_t = β · mean_t + (1 − β) · τ_{t−1}; the first mean starts it.
      threshold_after = threshold_before < 0 ? mean : beta * mean + (1 - beta) * threshold_before;
      k_out = at::zeros({kv, static_cast<int64_t>(kept.size()), c.head_dim}, at::kDouble);
      v_out = at::zeros_like(k_out);
      for (int64_t h = 0; h < kv; ++h) {
        for (size_t j = 0; j < kept.size(); ++j) {
          double den = std::exp(1.0);
          at::Tensor kk = K[h][kept[j]] * std::exp(1.0), vv = V[h][kept[j]] * std::exp(1.0);
          for (size_t i = 0; i < evicted.size(); ++i) {
            const auto [target, sim] = best[static_cast<size_t>(h)][i];
            if (target != static_cast<int64_t>(j) || sim < threshold_after) continue;
            ++merged;
            kk = kk + K[h][evicted[i]] * std::exp(sim);
            vv = vv + V[h][evicted[i]] * std::exp(sim);
            den += std::exp(sim);
          }
          k_out[h][static_cast<int64_t>(j)] = kk / den;
          v_out[h][static_cast<int64_t>(j)] = vv / den;
        }
      }
    };
    double threshold = -1, expected_threshold = 0;
    at::Tensor ek, ev;
    expect_merge(threshold, 0.7, expected_threshold, ek, ev);
    const at::Tensor keep =
        at::tensor(kept, at::kLong).unsqueeze(0).expand({kv, static_cast<int64_t>(kept.size())}).contiguous();
    d2o_merge(cache, keep, 0.7, threshold);
    cache.retain(keep);  // the merge rewrites kept entries in place; eviction is the caller's
    EXPECT_NEAR(threshold, expected_threshold, 1e-6);
    EXPECT_TRUE(cache.keys().to(at::kDouble).allclose(ek, 1e-5, 1e-6));
    EXPECT_TRUE(cache.values().to(at::kDouble).allclose(ev, 1e-5, 1e-6));
    EXPECT_TRUE(cache.positions().equal(keep));
    // Some entries were merged and some dropped: both branches are exercised.
    EXPECT_GT(merged, 0);
    EXPECT_LT(merged, static_cast<int>(kv * static_cast<int64_t>(evicted.size())));
  }
}

TEST(PressMethods, D2OAblationParameters) {
  const auto& c = model().config();
  // Reference: the same press with room for everything (same attention probes, so bit-identical keys).
  const PressRun full = run(setup_for("d2o:merge=0", 0, kPrompt), prompt(kPrompt), 0);
  // merge=0: evicted entries are dropped, kept ones keep their exact keys.
  const PressRun plain = run(setup_for("d2o:merge=0", 0.5), prompt(kPrompt), 0);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto heads = head_positions(plain.cache.layer(l));
    for (int64_t h = 0; h < static_cast<int64_t>(heads.size()); ++h) {
      const at::Tensor expected = head_keys(full.cache.layer(l), h).index_select(0, heads[static_cast<size_t>(h)]);
      EXPECT_TRUE(head_keys(plain.cache.layer(l), h).equal(expected));
    }
  }
  // layers=uniform: every layer keeps the same budget; the default splits it by inverse variance.
  const PressRun uniform = run(setup_for("d2o:layers=uniform", 0.5), prompt(kPrompt), 0);
  for (int64_t l = 0; l < c.num_layers; ++l)
    EXPECT_EQ(uniform.cache.layer(l).lengths()[0].item<int64_t>(), kPrompt / 2);
  EXPECT_THROW(setup_for("d2o:layers=pyramid", 0.5), Error);
}

// The paper's Table 6 ablations as parameters. "w.o. Layer Operation" is layers=uniform (above); without
// the layer split and the merge D2O is H2O: sinks=0 and merge=0 keep what H2O keeps, prompt and decode.
TEST(PressMethods, D2OWithoutMergeOrLayerSplitIsH2O) {
  const PressRun d2o = run(setup_for("d2o:sinks=0,recent=0.5,merge=0,layers=uniform", 0.5), prompt(kPrompt), 6);
  const PressRun h2o = run(setup_for("h2o:recent=0.5", 0.5), prompt(kPrompt), 6);
  for (int64_t l = 0; l < d2o.cache.num_layers(); ++l) {
    const auto a = head_positions(d2o.cache.layer(l)), b = head_positions(h2o.cache.layer(l));
    ASSERT_EQ(a.size(), b.size());
    for (size_t h = 0; h < a.size(); ++h) EXPECT_TRUE(std::get<0>(a[h].sort()).equal(std::get<0>(b[h].sort()))) << l;
  }
  for (size_t i = 0; i < d2o.logits.size(); ++i) EXPECT_TRUE(d2o.logits[i].equal(h2o.logits[i])) << i;
}

// "w.o. EMA-Threshold" (Table 6): threshold=none merges every evicted entry into its most similar kept
// one; threshold=C compares each best similarity with a fixed cosine C that no merge moves.
TEST(PressMethods, D2OFixedThresholdsMergeByTheirOwnRule) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  const int64_t n = 16, kv = c.num_kv_heads;
  at::manual_seed(17);
  const at::Tensor k = at::randn({kv, n, c.head_dim}, at::kDouble), v = at::randn({kv, n, c.head_dim}, at::kDouble);
  const std::vector<int64_t> kept{0, 3, 4, 9, 15};
  const at::Tensor keep = at::tensor(kept, at::kLong).unsqueeze(0).expand({kv, 5}).contiguous();
  // Each evicted entry's best cosine over the kept keys as the cache holds them (after RoPE), by brute force.
  DenseLayerCache held(shape, model().rope(), at::TensorOptions().dtype(at::kDouble));
  held.append(k, v, at::arange(n, at::kLong));
  const at::Tensor K = held.keys().clone();
  std::vector<double> best;
  for (int64_t h = 0; h < kv; ++h)
    for (int64_t e = 0; e < n; ++e) {
      if (std::find(kept.begin(), kept.end(), e) != kept.end()) continue;
      double b = -2;
      for (int64_t j : kept)
        b = std::max(b, (at::dot(K[h][e], K[h][j]) / (K[h][e].norm() * K[h][j].norm())).item<double>());
      best.push_back(b);
    }
  std::vector<double> sorted = best;
  std::sort(sorted.begin(), sorted.end());
  // Halfway between two neighbouring similarities, so that no entry lies on the threshold (one on it
  // would be counted by whichever rounding d2o_merge's kernel did, which differs between CPUs).
  const size_t mid = sorted.size() / 2;
  ASSERT_LT(sorted[mid - 1] + 1e-9, sorted[mid]);
  const double median = (sorted[mid - 1] + sorted[mid]) / 2;
  for (const double fixed : {-std::numeric_limits<double>::infinity(), median}) {
    SCOPED_TRACE(fixed);
    DenseLayerCache cache(shape, model().rope(), at::TensorOptions().dtype(at::kDouble));
    cache.append(k, v, at::arange(n, at::kLong));
    double threshold = fixed;
    at::Tensor merged;
    d2o_merge(cache, keep, 0.7, threshold, &merged, /*ema=*/false);
    EXPECT_EQ(threshold, fixed);
    const auto expected = std::count_if(best.begin(), best.end(), [&](double b) { return b >= fixed; });
    ASSERT_TRUE(merged.defined());
    EXPECT_EQ(merged.size(0), expected);
    if (std::isinf(fixed)) EXPECT_EQ(expected, static_cast<int64_t>(best.size()));
  }
  for (const char* spec :
       {"d2o:threshold=none", "d2o:threshold=0.5", "d2o:threshold=-1", "d2o:layers=uniform,threshold=none"})
    EXPECT_NO_THROW(setup_for(spec, 0.5)) << spec;
  for (const char* spec : {"d2o:threshold=1.5", "d2o:threshold=often", "d2o:merge=0,threshold=none"})
    EXPECT_THROW(setup_for(spec, 0.5), Error) << spec;
}

// A decode step evicts one entry per head; float32 caches take a one-pass path, and caches on a GPU a
// path of tensor operations alone (run here on the CPU). Both must merge as the general path does (run
// here on a float64 copy of the same cache): same targets, rows and threshold.
TEST(PressMethods, D2ODecodeMergeMatchesTheGeneralPath) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  const int64_t n = 40, kv = c.num_kv_heads;
  at::manual_seed(13);
  const at::Tensor k = at::randn({kv, n, c.head_dim}), v = at::randn({kv, n, c.head_dim});
  for (const double start : {-1.0, 0.0, 0.35}) {
    DenseLayerCache fast(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
    DenseLayerCache general(shape, model().rope(), at::TensorOptions().dtype(at::kDouble));
    DenseLayerCache device(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
    fast.append(k, v, at::arange(n, at::kLong));
    device.append(k, v, at::arange(n, at::kLong));
    general.append(k.to(at::kDouble), v.to(at::kDouble), at::arange(n, at::kLong));
    // Head h evicts entry 3 h + 1: every index but that one, ascending.
    std::vector<at::Tensor> rows;
    for (int64_t h = 0; h < kv; ++h) {
      const at::Tensor all = at::arange(n, at::kLong);
      rows.push_back(all.masked_select(all != 3 * h + 1));
    }
    const at::Tensor keep = at::stack(rows);
    double t_fast = start, t_general = start;
    at::Tensor m_fast, m_general;
    d2o_merge(fast, keep, 0.7, t_fast, &m_fast);
    d2o_merge(general, keep, 0.7, t_general, &m_general);
    at::Tensor t_device = at::full({}, start, at::kDouble), m_device;
    d2o_merge_one_per_head_on_device(device, keep, 0.7, t_device, &m_device);
    EXPECT_NEAR(t_device.item<double>(), t_general, 1e-6) << start;
    ASSERT_EQ(m_device.defined(), m_general.defined()) << start;
    if (m_general.defined()) EXPECT_TRUE(m_device.equal(m_general)) << start;
    EXPECT_TRUE(device.keys().to(at::kDouble).allclose(general.keys(), 1e-5, 1e-6)) << start;
    EXPECT_TRUE(device.values().to(at::kDouble).allclose(general.values(), 1e-5, 1e-6)) << start;
    EXPECT_NEAR(t_fast, t_general, 1e-6) << start;
    if (start < 0) EXPECT_TRUE(m_general.defined());  // the first mean: some head's best is above it
    ASSERT_EQ(m_fast.defined(), m_general.defined()) << start;
    if (m_general.defined()) EXPECT_TRUE(m_fast.equal(m_general)) << start;
    EXPECT_TRUE(fast.keys().to(at::kDouble).allclose(general.keys(), 1e-5, 1e-6)) << start;
    EXPECT_TRUE(fast.values().to(at::kDouble).allclose(general.values(), 1e-5, 1e-6)) << start;
  }
}

// D2O Eq. 10 with a threshold already set: the current mean of the per-token best similarities gets
// the weight β, the history 1 − β ("greater weight to more recent").
TEST(CompressionPaperEquations, D2OEq10EmaWeightsTheCurrentMeanByBeta) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  DenseLayerCache cache(shape, model().rope(), at::TensorOptions().dtype(at::kDouble));
  at::manual_seed(11);
  const int64_t n = 12, kv = c.num_kv_heads;
  cache.append(at::randn({kv, n, c.head_dim}, at::kDouble), at::randn({kv, n, c.head_dim}, at::kDouble),
               at::arange(n, at::kLong));
  const std::vector<int64_t> kept{0, 2, 5, 7, 11};
  const at::Tensor K = cache.keys().clone();
  double sum = 0;
  int64_t count = 0;
  for (int64_t h = 0; h < kv; ++h) {
    for (int64_t e = 0; e < n; ++e) {
      if (std::find(kept.begin(), kept.end(), e) != kept.end()) continue;
      double best = -2;
      for (int64_t j : kept)
        best = std::max(best, (at::dot(K[h][e], K[h][j]) / (K[h][e].norm() * K[h][j].norm())).item<double>());
      sum += best;
      ++count;
    }
  }
  const double previous = 0.9, beta = 0.7, mean = sum / static_cast<double>(count);
  double threshold = previous;
  const at::Tensor keep = at::tensor(kept, at::kLong).unsqueeze(0).expand({kv, 5}).contiguous();
  d2o_merge(cache, keep, beta, threshold);
  EXPECT_NEAR(threshold, beta * mean + (1 - beta) * previous, 1e-9);
  EXPECT_GT(std::abs(threshold - (beta * previous + (1 - beta) * mean)), 1e-3);  // the old, swapped weights
}

// Records the prefill attention statistics every layer computes (what the presses' probes ask for).
class StatsRecorder : public ForwardObserver {
 public:
  explicit StatsRecorder(int64_t window) : window_(window) {}
  AttentionProbe probe(int64_t) const override { return {true, window_}; }
  void after_attention(const LayerStep& step, KVCache&) override {
    column_sums.push_back(step.stats.column_sums.to(at::kDouble).clone());
    window_probs.push_back(step.stats.window_probs.to(at::kDouble).clone());
  }
  std::vector<at::Tensor> column_sums, window_probs;

 private:
  int64_t window_;
};

StatsRecorder record_stats(const std::vector<int>& ids, int64_t window) {
  StatsRecorder rec(window);
  KVCache cache = CacheSetup{}.new_cache(model());
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &rec;
  model().forward(ids, cache, o);
  return rec;
}

// Runs a press on the prompt and returns the per-layer entries per head it keeps after prefill.
std::vector<int64_t> layer_budgets(const std::string& press, double ratio, const std::vector<int>& ids) {
  const CacheSetup setup = setup_for(press, ratio);
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model().forward(ids, cache, o);
  std::vector<int64_t> out;
  for (int64_t l = 0; l < cache.num_layers(); ++l) out.push_back(cache.layer(l).lengths().max().item<int64_t>());
  return out;
}

// Integer budgets proportional to `weights` summing to `total` (each within [0, cap]): the expectation
// the tests compare with, within one entry per layer for rounding.
std::vector<double> proportional(std::vector<double> weights, double total, double cap) {
  std::vector<double> out(weights.size(), 0);
  std::vector<bool> fixed(weights.size(), false);
  for (size_t round = 0; round < weights.size(); ++round) {
    double wsum = 0, left = total;
    for (size_t i = 0; i < weights.size(); ++i) (fixed[i] ? left -= out[i] : wsum += weights[i]);
    bool clamped = false;
    for (size_t i = 0; i < weights.size(); ++i) {
      if (fixed[i]) continue;
      out[i] = left * weights[i] / wsum;
      if (out[i] > cap) out[i] = cap, fixed[i] = true, clamped = true;
    }
    if (!clamped) break;
  }
  return out;
}

// D2O Eq. 4–5 (and A.9 Eq. 20): σ²_l = variance of each query head's cumulative-attention sequence
// (column sums of the prompt's attention), averaged over the heads; layer budgets ∝ exp(1/σ²_l).
TEST(CompressionPaperEquations, D2OEq5LayerBudgetsAreTheInverseVarianceSoftmax) {
  const auto ids = prompt(kPrompt);
  const StatsRecorder rec = record_stats(ids, 1);
  const int64_t L = model().config().num_layers, budget = kPrompt / 2;
  std::vector<double> inv, exp_inv;
  for (const auto& cs : rec.column_sums) {
    double var = 0;
    for (int64_t h = 0; h < cs.size(0); ++h) {
      const double mean = cs[h].mean().item<double>();
      var += ((cs[h] - mean).pow(2).mean().item<double>()) / static_cast<double>(cs.size(0));
    }
    inv.push_back(1.0 / var);
  }
  const double mx = *std::max_element(inv.begin(), inv.end());
  for (double v : inv) exp_inv.push_back(std::exp(v - mx));
  const auto expected = proportional(exp_inv, static_cast<double>(budget * L), kPrompt);
  const auto got = layer_budgets("d2o", 0.5, ids);
  for (int64_t l = 0; l < L; ++l)
    EXPECT_NEAR(static_cast<double>(got[static_cast<size_t>(l)]), expected[static_cast<size_t>(l)], 1.0) << l;
  // Table 4's other splits over the same variances: 1/σ² (reciprocal) and exp(−σ²) (exponential decay).
  std::vector<double> decay;
  for (double v : inv) decay.push_back(std::exp(-1.0 / v));
  for (const auto& [spec, weights] : std::vector<std::pair<std::string, std::vector<double>>>{
           {"d2o:layers=reciprocal", inv}, {"d2o:layers=exp_decay", decay}}) {
    const auto want = proportional(weights, static_cast<double>(budget * L), kPrompt);
    const auto split = layer_budgets(spec, 0.5, ids);
    for (int64_t l = 0; l < L; ++l)
      EXPECT_NEAR(static_cast<double>(split[static_cast<size_t>(l)]), want[static_cast<size_t>(l)], 1.0) << spec << l;
  }
  // layers=scaled: exp(τ · (1/σ²) / mean(1/σ²)) over the head-averaged variance.
  std::vector<double> scaled_inv, scaled;
  for (const auto& cs : rec.column_sums) scaled_inv.push_back(1.0 / cs.mean(0).var().item<double>());
  const double mean_inv = std::accumulate(scaled_inv.begin(), scaled_inv.end(), 0.0) / static_cast<double>(L);
  for (double v : scaled_inv) scaled.push_back(std::exp(2.0 * v / mean_inv));
  const auto expected_scaled = proportional(scaled, static_cast<double>(budget * L), kPrompt);
  const auto got_scaled = layer_budgets("d2o:layers=scaled,tau=2,variance=head_mean", 0.5, ids);
  for (int64_t l = 0; l < L; ++l)
    EXPECT_NEAR(static_cast<double>(got_scaled[static_cast<size_t>(l)]), expected_scaled[static_cast<size_t>(l)], 1.0)
        << l;
}

// DynamicKV Alg. 1 with one update after the last layer (m = L): global top-k, k = (wt − ws) · H · L,
// over every non-window SnapKV score of all layers (line 6); Z = B^l · count / max(count) (line 8);
// normalised to (wt − ws) · L (lines 9–10), capped at the entries each layer holds (B^l, or the prompt
// outside the window when that is fewer). Under the defaults (the official code's: window 8, kernel 7
// averaging the context columns alone over zero padding, rmax 10) and the committed results' (window 32,
// kernel 5 averaging what exists over every column, rmax 2).
TEST(CompressionPaperEquations, DynamicKVAlgorithm1BudgetsFromTheGlobalTopK) {
  struct Setting {
    std::string params;
    int64_t ws, kernel;
    bool zeros_over_context;
    double rmax;
  };
  const auto ids = prompt(kPrompt);
  const int64_t L = model().config().num_layers, KV = model().config().num_kv_heads;
  for (const Setting& set :
       {Setting{"", 8, 7, true, 10.0}, Setting{"window=32,kernel=5,pad=edge,pool=all,rmax=2,", 32, 5, false, 2.0}}) {
    SCOPED_TRACE(set.params);
    const int64_t ws = set.ws, half = set.kernel / 2;
    const StatsRecorder rec = record_stats(ids, ws);
    const int64_t budget = kPrompt / 2, a = budget - ws, bmax = std::llround(set.rmax * static_cast<double>(a));
    const int64_t pooled_len = set.zeros_over_context ? kPrompt - ws : kPrompt;
    std::vector<at::Tensor> scored;
    std::vector<int64_t> layer_of;
    for (int64_t l = 0; l < L; ++l) {
      // SnapKV's score: window attention summed over queries, group mean, average-pooled; the window itself is
      // not scored.
      const at::Tensor votes = rec.window_probs[static_cast<size_t>(l)].sum(1);
      const at::Tensor kv = votes.reshape({KV, -1, kPrompt}).mean(1);
      at::Tensor pooled = at::zeros_like(kv);
      for (int64_t j = 0; j < pooled_len; ++j) {
        const int64_t lo = std::max<int64_t>(0, j - half), hi = std::min<int64_t>(pooled_len, j + half + 1);
        const at::Tensor sum = kv.narrow(1, lo, hi - lo).sum(1);
        pooled.select(1, j).copy_(sum / static_cast<double>(set.zeros_over_context ? set.kernel : hi - lo));
      }
      const at::Tensor outside = pooled.narrow(1, 0, kPrompt - ws).reshape({-1});
      scored.push_back(outside);
      for (int64_t i = 0; i < outside.numel(); ++i) layer_of.push_back(l);
    }
    const at::Tensor all = at::cat(scored);
    const at::Tensor top = std::get<1>(all.topk(a * KV * L));
    std::vector<double> counts(static_cast<size_t>(L), 0);
    for (int64_t i = 0; i < top.numel(); ++i)
      counts[static_cast<size_t>(layer_of[static_cast<size_t>(top[i].item<int64_t>())])] += 1;
    const double max_count = *std::max_element(counts.begin(), counts.end());
    std::vector<double> z;
    for (double c : counts) z.push_back(static_cast<double>(bmax) * c / max_count);
    const double held = static_cast<double>(std::min(bmax, kPrompt - ws));
    const auto expected = proportional(z, static_cast<double>(a * L), held);
    const auto got = layer_budgets("dynamickv:" + set.params + "m=" + std::to_string(L), 0.5, ids);
    int64_t sum = 0;
    for (int64_t l = 0; l < L; ++l) {
      EXPECT_NEAR(static_cast<double>(got[static_cast<size_t>(l)] - ws), expected[static_cast<size_t>(l)], 1.0) << l;
      sum += got[static_cast<size_t>(l)];
    }
    EXPECT_EQ(sum, budget * L);
    // Intermediate updates (m = 1) normalise to (wt − ws) · L as well, so they trim little and the total
    // still comes out exact.
    const auto stepwise = layer_budgets("dynamickv:" + set.params + "m=1", 0.5, ids);
    EXPECT_EQ(std::accumulate(stepwise.begin(), stepwise.end(), int64_t{0}), budget * L);
  }
  // The defaults are the official code's, spelt out.
  EXPECT_EQ(layer_budgets("dynamickv", 0.5, ids),
            layer_budgets("dynamickv:window=8,kernel=7,pad=zeros,pool=context,m=4,rmax=10", 0.5, ids));
  EXPECT_THROW(setup_for("dynamickv:rmax=0.5", 0.5), Error);
  EXPECT_THROW(setup_for("dynamickv:m=0", 0.5), Error);
  EXPECT_THROW(setup_for("dynamickv:pool=some", 0.5), Error);
}

// KVCompose Eq. 14–22: scores = max over the task tokens' attention, mean over a KV group's query heads,
// plus the mean over KV heads; composite k = each head's k-th best, scored by the mean over heads; the
// global top (1 − r) · L · N of the pooled composites sets each layer's budget. The protected task
// tokens rank by their own scores there (no floor of `window` per layer) and survive in each layer's
// own selection.
TEST(CompressionPaperEquations, KVComposeEq22BudgetsWithoutATaskTokenFloor) {
  const auto ids = prompt(kPrompt);
  const int64_t L = model().config().num_layers, KV = model().config().num_kv_heads, task = 32;
  const StatsRecorder rec = record_stats(ids, task);
  for (double ratio : {0.5, 0.9}) {
    SCOPED_TRACE(ratio);
    const int64_t budget = std::llround((1 - ratio) * kPrompt);
    std::vector<at::Tensor> composites;
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor per_head = std::get<0>(rec.window_probs[static_cast<size_t>(l)].max(1));
      const at::Tensor kv = per_head.reshape({KV, -1, kPrompt}).mean(1);
      const at::Tensor s = kv + kv.mean(0, true);
      composites.push_back(std::get<0>(s.sort(-1, true)).mean(0));
    }
    const at::Tensor top = std::get<1>(at::cat(composites).topk(budget * L));
    std::vector<double> expected(static_cast<size_t>(L), 0);
    for (int64_t i = 0; i < top.numel(); ++i) expected[static_cast<size_t>(top[i].item<int64_t>() / kPrompt)] += 1;
    const CacheSetup setup = setup_for("kvcompose:task=window,kernel=1", ratio);  // the paper scores without pooling
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    ForwardOptions o;
    o.all_logits = false;
    o.observer = observer.get();
    model().forward(ids, cache, o);
    for (int64_t l = 0; l < L; ++l) {
      const int64_t got = cache.layer(l).lengths()[0].item<int64_t>();
      EXPECT_NEAR(static_cast<double>(got), std::max(1.0, expected[static_cast<size_t>(l)]), 1.0) << l;
      // The newest min(task, budget) prompt tokens are kept in every head.
      for (const auto& p : head_positions(cache.layer(l))) {
        const int64_t newest = std::min(task, got);
        EXPECT_EQ(std::get<0>(p.sort()).narrow(0, got - newest, newest).equal(at::arange(kPrompt - newest, kPrompt)),
                  true);
      }
    }
  }
}

// The paper's ablations of KVCompose: budgets=uniform keeps the ratio's budget in every layer, each head its
// own best entries; tokens=aligned keeps in every head of a layer the positions with the best mean score
// over heads, under the pooled budgets of Eq. 20–22 computed from those mean scores. Both against the scores
// recorded from the same prompt, task tokens protected in each layer's selection.
TEST(CompressionPaperEquations, KVComposeAblationsKeepWhatTheirDefinitionsSelect) {
  const auto ids = prompt(kPrompt);
  const int64_t L = model().config().num_layers, KV = model().config().num_kv_heads, task = 32;
  ASSERT_GT(KV, 1);
  const StatsRecorder rec = record_stats(ids, task);
  const double ratio = 0.75;
  const int64_t budget = std::llround((1 - ratio) * kPrompt);
  // Each layer's scores [KV, S] (Eq. 14–16) and, for the selection, the newest `task` entries first.
  std::vector<at::Tensor> scores;
  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor per_head = std::get<0>(rec.window_probs[static_cast<size_t>(l)].max(1));
    const at::Tensor kv = per_head.reshape({KV, -1, kPrompt}).mean(1);
    scores.push_back(kv + kv.mean(0, true));
  }
  const auto kept_by = [&](const at::Tensor& row, int64_t n) {
    at::Tensor ranked = row.to(at::kDouble).clone();
    ranked.narrow(0, kPrompt - task, task).add_(1e6);
    return std::get<0>(std::get<1>(ranked.topk(n)).sort());
  };
  const auto run = [&](const std::string& spec) {
    const CacheSetup setup = setup_for(spec, ratio);
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    model().forward(ids, cache, ForwardOptions{false, observer.get()});
    std::vector<std::vector<at::Tensor>> kept;
    for (int64_t l = 0; l < L; ++l) {
      std::vector<at::Tensor> heads;
      for (const auto& p : head_positions(cache.layer(l))) heads.push_back(std::get<0>(p.sort()));
      kept.push_back(heads);
    }
    return kept;
  };
  const auto uniform = run("kvcompose:task=window,kernel=1,budgets=uniform");
  for (int64_t l = 0; l < L; ++l) {
    for (int64_t h = 0; h < KV; ++h) {
      EXPECT_TRUE(uniform[l][h].equal(kept_by(scores[l][h], budget))) << "uniform, layer " << l << " head " << h;
    }
  }
  std::vector<at::Tensor> sorted_means;
  for (const at::Tensor& s : scores) sorted_means.push_back(std::get<0>(s.mean(0).sort(-1, true)));
  const at::Tensor top = std::get<1>(at::cat(sorted_means).topk(budget * L));
  std::vector<int64_t> counts(static_cast<size_t>(L), 0);
  for (int64_t i = 0; i < top.numel(); ++i) counts[static_cast<size_t>(top[i].item<int64_t>() / kPrompt)] += 1;
  const auto aligned = run("kvcompose:task=window,kernel=1,tokens=aligned");
  bool budgets_differ = false;
  for (int64_t l = 0; l < L; ++l) {
    const int64_t n = std::max<int64_t>(1, counts[static_cast<size_t>(l)]);
    budgets_differ |= n != budget;
    for (int64_t h = 0; h < KV; ++h) {
      EXPECT_TRUE(aligned[l][h].equal(kept_by(scores[l].mean(0), n))) << "aligned, layer " << l << " head " << h;
    }
  }
  EXPECT_TRUE(budgets_differ);  // the pooled budgets are not the uniform ones on this prompt
  // The default composite tokens keep different positions in different heads.
  const auto composite = run("kvcompose:task=window,kernel=1");
  bool heads_differ = false;
  for (int64_t l = 0; l < L; ++l) heads_differ |= !composite[l][0].equal(composite[l][1]);
  EXPECT_TRUE(heads_differ);
  EXPECT_THROW(setup_for("kvcompose:budgets=fixed", ratio), Error);
  EXPECT_THROW(setup_for("kvcompose_unstructured:tokens=aligned", ratio), Error);
}

// kvpress scores KVCompose by a second copy of the context fed after it. The model runs both copies in
// one pass; checked here against running the doubled prompt by hand: the observer gets the copy's
// attention over the prompt's entries, and the prompt's logits and cache come out as if the copy had
// never been fed (float64, so the comparisons are exact up to summation order).
class RepeatingRecorder : public ForwardObserver {
 public:
  AttentionProbe probe(int64_t) const override { return {false, std::numeric_limits<int64_t>::max() / 2}; }
  std::vector<int> scoring_tokens(const std::vector<int>& prompt) const override {
    return window_probs.empty() ? prompt : std::vector<int>{};
  }
  void after_attention(const LayerStep& step, KVCache&) override {
    window_probs.push_back(step.stats.window_probs.to(at::kDouble).clone());
  }
  std::vector<at::Tensor> window_probs;
};

TEST(CompressionPaperEquations, KVComposeRepeatedPromptIsTheCopysAttentionAndLeavesNoTrace) {
  const LlamaModel& m = exact_model();
  const int64_t n = 48, L = m.config().num_layers;
  const std::vector<int> ids = prompt(n);
  std::vector<int> doubled = ids;
  doubled.insert(doubled.end(), ids.begin(), ids.end());
  // By hand: the doubled prompt; the copy's queries are its last n.
  StatsRecorder by_hand(n);
  {
    KVCache cache = m.new_cache();
    m.forward(doubled, cache, ForwardOptions{true, &by_hand});
  }
  RepeatingRecorder repeating;
  KVCache cache = m.new_cache(), plain = m.new_cache();
  const at::Tensor logits = m.forward(ids, cache, ForwardOptions{true, &repeating});
  const at::Tensor expected = m.forward(ids, plain);
  ASSERT_EQ(repeating.window_probs.size(), static_cast<size_t>(L));
  for (int64_t l = 0; l < L; ++l) {
    const at::Tensor want = by_hand.window_probs[static_cast<size_t>(l)].narrow(2, 0, n);  // [H, n, n]
    EXPECT_LT((repeating.window_probs[static_cast<size_t>(l)] - want).abs().max().item<double>(), 1e-12) << l;
    // The copy's queries have read the whole prompt: every entry, not only earlier ones, gets attention.
    EXPECT_GT(want.narrow(1, 0, 1).narrow(2, n - 1, 1).min().item<double>(), 0.0) << l;
    // The copy left no entry behind.
    const auto& layer = dynamic_cast<const DenseLayerCache&>(cache.layer(l));
    EXPECT_TRUE(layer.positions().equal(at::arange(n, at::kLong).unsqueeze(0).expand_as(layer.positions()))) << l;
    EXPECT_TRUE(layer.keys().equal(dynamic_cast<const DenseLayerCache&>(plain.layer(l)).keys())) << l;
  }
  EXPECT_EQ(cache.next_position(), n);
  EXPECT_EQ(logits.sizes(), expected.sizes());
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-9);
  // Decoding goes on as after a plain prefill, and the copy is fed once only.
  const at::Tensor next = m.forward({ids[1]}, cache, ForwardOptions{true, &repeating});
  EXPECT_LT((next - m.forward({ids[1]}, plain)).abs().max().item<double>(), 1e-9);
  EXPECT_EQ(repeating.window_probs.size(), static_cast<size_t>(2 * L));
}

// KVCompose's defaults are the paper's task-agnostic setting: T = {C}, the context fed as the task
// (task=repeat), scores not pooled (kernel=1); task=window,kernel=5 (the committed results') stays selectable.
TEST(CompressionPaperEquations, KVComposeDefaultsToTheTaskAgnosticContextTaskSet) {
  const auto kept = [](const std::string& spec) {
    const PressRun r = run(setup_for(spec, 0.5), prompt(kPrompt), 0);
    std::vector<at::Tensor> out;
    for (int64_t l = 0; l < r.cache.num_layers(); ++l)
      for (const auto& h : head_positions(r.cache.layer(l))) out.push_back(std::get<0>(h.sort()));
    return out;
  };
  const auto same = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!a[i].equal(b[i])) return false;
    return true;
  };
  const auto defaults = kept("kvcompose");
  EXPECT_TRUE(same(defaults, kept("kvcompose:task=repeat,kernel=1")));
  EXPECT_FALSE(same(defaults, kept("kvcompose:task=window,kernel=5")));
  EXPECT_TRUE(same(kept("kvcompose_unstructured"), kept("kvcompose_unstructured:task=repeat,kernel=1")));
  // The repeated context is fed after the prompt: a shared prefill of its own, not the other presses'.
  const std::vector<CacheSetup> setups{setup_for("kvcompose", 0.5), setup_for("kvcompose:task=window", 0.5),
                                       setup_for("kvcompose", 0.9)};
  const std::vector<const CacheSetup*> all{&setups[0], &setups[1], &setups[2]};
  const std::vector<int> prompt{1, 5, 9, 2, 7};
  EXPECT_EQ(prefill_groups(all, {0, 1, 2}, model(), prompt), (std::vector<std::vector<size_t>>{{0, 2}, {1}}));
}

// --dump-kept: per layer × KV head the positions kept after prefill and held at the end, and D2O's
// merges (evicted position -> kept position), read back from the file.
TEST(CompressionKeptDump, PositionsAndMergesRoundTrip) {
  const CacheSetup setup = setup_for("d2o", 0.5);
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  const std::string path = ::testing::TempDir() + "/kept.safetensors";
  start_kept_dump(path, observer.get());
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  const auto ids = prompt(kPrompt + 4);
  model().forward(std::vector<int>(ids.begin(), ids.begin() + kPrompt), cache, o);
  std::vector<std::vector<at::Tensor>> after_prefill;
  for (int64_t l = 0; l < cache.num_layers(); ++l) after_prefill.push_back(head_positions(cache.layer(l)));
  for (int64_t i = 0; i < 4; ++i) model().forward({ids[static_cast<size_t>(kPrompt + i)]}, cache, o);
  finish_kept_dump(path, observer.get(), cache, {{"press", "d2o"}});
  auto file = st::SafetensorsFile::open(path);
  EXPECT_EQ(file->metadata().at("press"), "d2o");
  EXPECT_EQ(file->metadata().at("prompt_tokens"), std::to_string(kPrompt));
  int64_t merges = 0;
  for (int64_t l = 0; l < cache.num_layers(); ++l) {
    const auto final_heads = head_positions(cache.layer(l));
    for (size_t h = 0; h < final_heads.size(); ++h) {
      const std::string key = std::to_string(l) + "." + std::to_string(h);
      const at::Tensor kept = load_tensor(file, "kept." + key);
      EXPECT_EQ(kept.scalar_type(), at::kInt);
      EXPECT_TRUE(kept.to(at::kLong).equal(std::get<0>(after_prefill[static_cast<size_t>(l)][h].sort())));
      EXPECT_TRUE(load_tensor(file, "final." + key).to(at::kLong).equal(std::get<0>(final_heads[h].sort())));
      if (!file->contains("merged." + key)) continue;
      const at::Tensor m = load_tensor(file, "merged." + key).to(at::kLong);
      ASSERT_EQ(m.size(1), 2);
      merges += m.size(0);
      // Every merge goes from a position no longer held into one that was held when it merged.
      for (int64_t i = 0; i < m.size(0); ++i) {
        EXPECT_NE(m[i][0].item<int64_t>(), m[i][1].item<int64_t>());
        EXPECT_LT(m[i][1].item<int64_t>(), kPrompt + 4);
      }
    }
  }
  EXPECT_GT(merges, 0);
  // Without a press there is nothing to record.
  EXPECT_THROW(start_kept_dump(path, nullptr), Error);
}

// Query-agnostic protocol: the budget is set on the context; the question fed after it must be kept
// whole, without evicting context for it: a bounded press that held the question's forward pass to the
// context's budget would let the question push context (or, for TOVA and D2O, itself) out.
TEST(BoundedDecoding, QuestionFedAfterTheContextIsKeptWhole) {
  const auto& c = model().config();
  const int64_t q = 12, budget = kPrompt / 2;
  const std::vector<int> ids = prompt(kPrompt + q);
  PromptTokens p;
  p.context.assign(ids.begin(), ids.begin() + kPrompt);
  p.question.assign(ids.begin() + kPrompt, ids.end());
  const Tokenizer tok = Tokenizer::load(test::model_dir("stories260K") + "/tokenizer.model");
  const int64_t entry_bytes = c.num_layers * c.num_kv_heads * 2 * c.head_dim * 4;
  for (const char* name : {"streaming_llm", "h2o", "tova", "d2o"}) {
    SCOPED_TRACE(name);
    const CacheSetup setup = setup_for(name, 0.5);
    // Through the harness: the payload after the question is the context's budget plus the question.
    const SampleOutput out = run_sample(model(), tok, setup, p, QueryMode::Agnostic, DecodeOptions{1, false});
    EXPECT_EQ(out.kv_payload_bytes, (budget + q) * entry_bytes);
    // The observer: every question position is cached in every layer and head, and decoding then
    // holds the cache at that size.
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    const ForwardOptions o{false, observer.get()};
    model().forward(p.context, cache, o);
    observer->hold_next_pass();
    model().forward(p.question, cache, o);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      for (const auto& pos : head_positions(cache.layer(l))) {
        ASSERT_GE(pos.numel(), q);
        EXPECT_TRUE(pos.narrow(0, pos.numel() - q, q).equal(at::arange(kPrompt, kPrompt + q, at::kLong))) << l;
      }
    }
    const int64_t entries = cache.footprint().entries;
    EXPECT_EQ(entries, (budget + q) * c.num_layers * c.num_kv_heads);
    for (int i = 0; i < 4; ++i) model().forward({ids[static_cast<size_t>(5 + i)]}, cache, o);
    EXPECT_EQ(cache.footprint().entries, entries);
  }
}

TEST(PressErrors, BadParametersAreOneLineErrors) {
  const auto message = [](const std::string& press) {
    try {
      setup_for(press, 0.5);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("snapkv:windw=8").find("unknown parameter 'windw'"), std::string::npos);
  EXPECT_NE(message("h2o:agg=median").find("agg must be mean or max"), std::string::npos);
  EXPECT_NE(message("snapkv:kernel=4").find("kernel must be odd"), std::string::npos);
  EXPECT_NE(message("ada:base=pyramidkv").find("own allocator"), std::string::npos);
  EXPECT_NE(message("nosuch").find("unknown method"), std::string::npos);
  EXPECT_NE(message("d2o:beta=nan").find("beta=nan is not a number"), std::string::npos);
  EXPECT_NE(message("snapkv:window=3x").find("window=3x is not an integer"), std::string::npos);
  // The kvpress catalogue: typed keys, unknown ones refused, wrappers around what they cannot wrap.
  EXPECT_NE(message("keydiff:window=8").find("unknown parameter 'window'"), std::string::npos);
  EXPECT_NE(message("expected_attention:future=0").find("future must be >= 1"), std::string::npos);
  EXPECT_NE(message("expected_attention:covariance=yes").find("covariance"), std::string::npos);
  EXPECT_NE(message("lagkv:lag=0").find("lag must be >= 1"), std::string::npos);
  EXPECT_NE(message("cur:leverage=cosine").find("leverage"), std::string::npos);
  EXPECT_NE(message("compactor:chunk=0").find("chunk must be >= 1"), std::string::npos);
  EXPECT_NE(message("non_causal_attention:chunk=-2").find("chunk must be >= 1"), std::string::npos);
  EXPECT_NE(message("leverage:ridge=-1").find("ridge"), std::string::npos);
  EXPECT_NE(message("cap:tau=nan").find("tau=nan"), std::string::npos);
  EXPECT_NE(message("criticalkv:base=h2o").find("evicts while decoding"), std::string::npos);
  EXPECT_NE(message("criticalkv:base=pyramidkv").find("own allocator"), std::string::npos);
  EXPECT_NE(message("criticalkv:first_stage=2").find("first_stage"), std::string::npos);
  EXPECT_NE(message("criticalkv:safeguard=0.2").find("criticalkv_ada"), std::string::npos);
  EXPECT_NE(message("ada:base=criticalkv_ada").find("own allocator"), std::string::npos);
  EXPECT_NE(message("chunk:base=snapkv").find("attention statistics"), std::string::npos);
  EXPECT_NE(message("chunk:base=h2o").find("not a prompt-time scorer"), std::string::npos);
  EXPECT_NE(message("chunk:size=0").find("size must be >= 1"), std::string::npos);
  EXPECT_NE(message("block:base=tova").find("not a prompt-time scorer"), std::string::npos);
  EXPECT_NE(message("block:base=kvcompose").find("not a prompt-time scorer"), std::string::npos);
  EXPECT_NE(message("block:base=snapkv").find("attention statistics"), std::string::npos);
  for (const std::string& bad : {"keydiff:window=8", "criticalkv:base=h2o", "lagkv:lag=0", "cur:leverage=cosine"})
    EXPECT_EQ(message(bad).find('\n'), std::string::npos) << bad;
}

TEST(PressErrors, BudgetsFileForAnotherModelIsRefused) {
  const std::string dir = test::make_temp_dir("press_budgets");
  st::SafetensorsWriter w;
  const int64_t L = model().config().num_layers;
  add_tensor(w, "ratios", at::tensor({0.5}, at::kDouble));
  add_tensor(w, "layer_budget_shares", at::full({1, L}, 1.0 / L, at::kDouble));
  w.set_metadata("config_hash", "0000000000000000");
  w.write(dir + "/foreign.safetensors");
  CompressionSpec spec;
  spec.press = "snapkv";
  spec.ratio = 0.5;
  spec.budgets_file = dir + "/foreign.safetensors";
  try {
    build_cache_setup(spec, model());
    FAIL() << "accepted a foreign budgets file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("made for another model"), std::string::npos) << e.what();
  }
  // The same file with this model's hash is used: per-layer budgets follow the shares exactly.
  st::SafetensorsWriter ok;
  std::vector<double> shares(static_cast<size_t>(L), 0.0);
  shares[0] = 0.5;
  for (int64_t l = 1; l < L; ++l) shares[static_cast<size_t>(l)] = 0.5 / (L - 1);
  add_tensor(ok, "ratios", at::tensor({0.5}, at::kDouble));
  add_tensor(ok, "layer_budget_shares", at::tensor(shares, at::kDouble).view({1, L}));
  ok.set_metadata("config_hash", model().config().config_hash);
  ok.write(dir + "/mine.safetensors");
  spec.budgets_file = dir + "/mine.safetensors";
  const PressRun r = run(build_cache_setup(spec, model()), prompt(kPrompt), 0);
  EXPECT_EQ(r.cache.layer(0).lengths()[0].item<int64_t>(), std::min<int64_t>(kPrompt, 80 * L / 2));
  EXPECT_EQ(r.after_prefill.entries, 80 * L * model().config().num_kv_heads);
  spec.ratio = 0.25;
  EXPECT_THROW(build_cache_setup(spec, model()), Error);
}

// kvpress' names for what kvc has under others keep the same entries: AdaKVPress is `adakv` (an alias of
// `ada`); PerLayerCompressionPress(press, ratios) is the press with --ratio mean(ratios) and --budgets
// holding each layer's share (1 − r_l) / Σ(1 − r_j) of the kept total: each layer keeps what the press keeps
// at that layer's own budget.
TEST(PressMethods, KvpressNamesKeepTheSameEntries) {
  const auto kept = [](const PressRun& r) {
    std::vector<std::vector<at::Tensor>> out;
    for (int64_t l = 0; l < r.cache.num_layers(); ++l) out.push_back(head_positions(r.cache.layer(l)));
    return out;
  };
  const auto same = [](const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
    if (a.size() != b.size()) return false;
    for (size_t h = 0; h < a.size(); ++h)
      if (!a[h].equal(b[h])) return false;
    return true;
  };
  const auto ada = kept(run(setup_for("ada:base=snapkv,window=8,safeguard=0.2", 0.5), prompt(kPrompt), 0));
  const auto adakv = kept(run(setup_for("adakv:base=snapkv,window=8,safeguard=0.2", 0.5), prompt(kPrompt), 0));
  for (size_t l = 0; l < ada.size(); ++l) EXPECT_TRUE(same(ada[l], adakv[l])) << "layer " << l;

  const int64_t L = model().config().num_layers;
  ASSERT_EQ(L, 5);
  // Per-layer ratios 1 − keep/160 (mean 0.5). --budgets gives every layer one entry and splits the rest of the
  // total (80 · 5) by the file's shares: shares (keep − 1) / Σ(keep − 1) give each layer exactly its keep.
  const std::vector<int64_t> keep{150, 100, 50, 25, 75};
  std::vector<double> shares;
  for (int64_t k : keep) shares.push_back(static_cast<double>(k - 1) / (L * 80.0 - L));
  const std::string dir = test::make_temp_dir("per_layer_ratios");
  st::SafetensorsWriter w;
  add_tensor(w, "ratios", at::tensor({0.5}, at::kDouble));
  add_tensor(w, "layer_budget_shares", at::tensor(shares, at::kDouble).view({1, L}));
  w.set_metadata("config_hash", model().config().config_hash);
  w.write(dir + "/per_layer.safetensors");
  CompressionSpec spec;
  spec.press = "snapkv:window=8";
  spec.ratio = 0.5;
  spec.budgets_file = dir + "/per_layer.safetensors";
  const auto per_layer = kept(run(build_cache_setup(spec, model()), prompt(kPrompt), 0));
  for (int64_t l = 0; l < L; ++l) {
    const auto at_own_budget =
        kept(run(setup_for("snapkv:window=8", 0, keep[static_cast<size_t>(l)]), prompt(kPrompt), 0));
    EXPECT_TRUE(same(per_layer[static_cast<size_t>(l)], at_own_budget[static_cast<size_t>(l)])) << "layer " << l;
  }
}

// A conversation's next turn (ForwardObserver::next_pass_is_prompt) is compressed by a prompt-time press
// on its own: what the cache held stays as it was, and 1 - ratio of the turn's entries are kept, the
// press's window among them; without the mark the pass is kept whole, as before.
TEST(PressMethods, ALaterPromptIsCompressedOnItsOwn) {
  const auto& c = model().config();
  const std::vector<int> ids = prompt(130);
  const std::vector<int> first(ids.begin(), ids.begin() + 80), turn(ids.begin() + 83, ids.begin() + 123);
  for (const bool mark : {true, false}) {
    SCOPED_TRACE(mark ? "marked as a prompt" : "not marked");
    const CacheSetup setup = setup_for("snapkv:window=8,kernel=5", 0.5);
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    const ForwardOptions o{false, observer.get()};
    model().forward(first, cache, o);
    for (int i = 80; i < 83; ++i) model().forward({ids[static_cast<size_t>(i)]}, cache, o);
    std::vector<std::vector<at::Tensor>> before;
    for (int64_t l = 0; l < c.num_layers; ++l) before.push_back(head_positions(cache.layer(l)));
    if (mark) observer->next_pass_is_prompt();
    model().forward(turn, cache, o);
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const auto after = head_positions(cache.layer(l));
      for (size_t h = 0; h < after.size(); ++h) {
        ASSERT_EQ(after[h].numel(), mark ? 43 + 20 : 43 + 40) << "layer " << l;
        EXPECT_TRUE(after[h].narrow(0, 0, 43).equal(before[static_cast<size_t>(l)][h])) << "layer " << l;
        const at::Tensor added = after[h].narrow(0, 43, after[h].numel() - 43);
        EXPECT_GE(added.min().item<int64_t>(), 83);
        EXPECT_LT(added.max().item<int64_t>(), 123);
        EXPECT_TRUE(added.narrow(0, added.numel() - 8, 8).equal(at::arange(115, 123, at::kLong))) << "the window";
      }
    }
    // Decoding after it keeps every entry, as after a first prompt.
    model().forward({ids[123]}, cache, o);
    EXPECT_EQ(cache.layer(0).lengths().max().item<int64_t>(), mark ? 64 : 84);
  }
  // Every prompt-time press takes a marked later prompt without touching what the cache held.
  for (const std::string& name : presses()) {
    const CacheSetup setup = setup_for(name, 0.5);
    if (setup.bounded) continue;
    SCOPED_TRACE(name);
    KVCache cache = setup.new_cache(model());
    auto observer = setup.new_observer();
    const ForwardOptions o{false, observer.get()};
    model().forward(first, cache, o);
    const int64_t held = cache.footprint().entries;
    observer->next_pass_is_prompt();
    model().forward(turn, cache, o);
    const int64_t entries = cache.footprint().entries;
    EXPECT_GT(entries, held);
    EXPECT_LE(entries, held + 40 * c.num_layers * c.num_kv_heads);
  }
}

}  // namespace
}  // namespace kvc
