// The decoding schedule (decoding:base=...,interval=N,target=T|fraction=R; kvpress' DecodingPress and
// CompressionRatioDecodingPress): the cache's length after every pass against a brute-force simulation of
// the schedule, the first compression's kept set against KNorm's top entries computed here from an
// uncompressed cache of the same tokens, and each allowed base's kept set against the same base
// compressing those tokens as one prompt (its decoded queries are the prompt's last ones).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numeric>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "model/llama_model.h"
#include "press/cam_merge.h"
#include "press/keyed_draw.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
namespace {

const LlamaModel& model() {
  static auto m = [] {
    LoadOptions options;
    options.dtype = "float64";
    return LlamaModel::load(test::model_dir("stories260K"), options);
  }();
  return *m;
}

std::vector<int> text_ids(int64_t n) {
  static const std::vector<int> ids = [] {
    const Tokenizer tok = Tokenizer::load(test::model_dir("stories260K") + "/tokenizer.model");
    return tok.encode_prompt(test::slurp(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 6000));
  }();
  return std::vector<int>(ids.begin(), ids.begin() + n);
}

CacheSetup setup_for(const std::string& press, int64_t budget = 0) {
  CompressionSpec spec;
  spec.press = press;
  spec.budget = budget;
  return build_cache_setup(spec, model());
}

// Feeds `prompt` tokens as a prompt, then the rest one pass per token (teacher-forced decoding); calls
// after_pass(pass, cache) after each decode pass (1-based).
KVCache run(const CacheSetup& setup, const std::vector<int>& ids, int64_t prompt,
            const std::function<void(int64_t, const KVCache&)>& after_pass = nullptr) {
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model().forward(std::vector<int>(ids.begin(), ids.begin() + prompt), cache, o);
  for (int64_t i = prompt; i < static_cast<int64_t>(ids.size()); ++i) {
    model().forward({ids[static_cast<size_t>(i)]}, cache, o);
    if (after_pass) after_pass(i - prompt + 1, cache);
  }
  return cache;
}

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string error_of(const std::string& press) {
  try {
    CompressionSpec spec;
    spec.press = press;
    build_cache_setup(spec, model());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(DecodingPress, CacheLengthFollowsTheScheduleAfterEveryPass) {
  // fraction=0.25 every 7 passes: at pass 7k the cache is cut to floor(seen × 0.75), seen = prompt + 7k.
  const int64_t prompt = 50, passes = 30, interval = 7;
  const std::vector<int> ids = text_ids(prompt + passes);
  std::vector<int64_t> expected, got;
  int64_t length = prompt;
  for (int64_t pass = 1; pass <= passes; ++pass) {
    ++length;
    if (pass % interval == 0)
      length = std::min(length, static_cast<int64_t>(std::floor(static_cast<double>(prompt + pass) * 0.75)));
    expected.push_back(length);
  }
  run(setup_for("decoding:base=knorm,interval=7,fraction=0.25"), ids, prompt, [&](int64_t, const KVCache& cache) {
    const at::Tensor lengths = cache.layer(0).lengths();
    for (int64_t l = 1; l < cache.num_layers(); ++l) EXPECT_TRUE(at::equal(cache.layer(l).lengths(), lengths));
    EXPECT_EQ(lengths.min().item<int64_t>(), lengths.max().item<int64_t>());
    got.push_back(lengths.max().item<int64_t>());
  });
  EXPECT_EQ(got, expected);
}

TEST(DecodingPress, WithARatioThePromptIsCompressedFirst) {
  // kvpress' PrefillDecodingPress with one scorer: --ratio 0.5 keeps 25 of the 50 prompt entries per head
  // (KNorm: different ones per head), then the cache grows by one per pass and is cut to 30 every 10 passes.
  const int64_t prompt = 50, passes = 25;
  const std::vector<int> ids = text_ids(prompt + passes);
  CompressionSpec spec;
  spec.press = "decoding:base=knorm,interval=10,target=30";
  spec.ratio = 0.5;
  const CacheSetup setup = build_cache_setup(spec, model());
  std::vector<int64_t> got, expected;
  for (int64_t pass = 1; pass <= passes; ++pass)
    expected.push_back(pass % 10 == 0 ? 30 : (pass < 10 ? 25 + pass : 30 + pass % 10));
  bool heads_differ = false;
  run(setup, ids, prompt, [&](int64_t, const KVCache& cache) {
    got.push_back(cache.layer(1).lengths().max().item<int64_t>());
    const std::vector<at::Tensor> heads = test::head_positions(cache.layer(1));
    heads_differ = heads_differ || !at::equal(heads[0], heads[1]);
  });
  EXPECT_EQ(got, expected);
  EXPECT_TRUE(heads_differ);
}

TEST(DecodingPress, FirstCompressionKeepsKNormsTopEntriesOfEveryTokenSeen) {
  // Until the first compression the cache holds every token as an uncompressed one does: at pass 12 the
  // 52 tokens seen are cut to 39 (fraction 0.25), the 39 lowest key norms per head. A token repeated in
  // the text has the same key norm in layer 0 up to rounding, so which of two tied entries survives is not
  // part of the definition: the kept norms must be the 39 lowest, and every norm clearly below the 39th kept.
  const int64_t prompt = 40, passes = 12, keep = 39;
  const double tie = 1e-5;
  const std::vector<int> ids = text_ids(prompt + passes);
  const KVCache compressed = run(setup_for("decoding:base=knorm,interval=12,fraction=0.25"), ids, prompt);
  const KVCache full = run(setup_for("none"), ids, prompt);
  for (int64_t l = 0; l < full.num_layers(); ++l) {
    const auto& dense = dynamic_cast<const DenseLayerCache&>(full.layer(l));
    const at::Tensor norms = dense.keys().to(at::kDouble).norm(2, -1);  // [n_kv, 52]
    const std::vector<at::Tensor> kept = test::head_positions(compressed.layer(l));
    ASSERT_EQ(static_cast<int64_t>(kept.size()), norms.size(0));
    for (int64_t h = 0; h < norms.size(0); ++h) {
      const std::vector<int64_t> positions = as_vector(dense.positions()[h]);
      const std::vector<int64_t> kept_positions = as_vector(kept[static_cast<size_t>(h)]);
      ASSERT_EQ(static_cast<int64_t>(kept_positions.size()), keep) << "layer " << l << " head " << h;
      std::vector<double> all(positions.size()), kept_norms;
      for (size_t i = 0; i < positions.size(); ++i) all[i] = norms[h][static_cast<int64_t>(i)].item<double>();
      for (const int64_t p : kept_positions) {
        const auto at = std::find(positions.begin(), positions.end(), p);
        ASSERT_NE(at, positions.end()) << "kept position " << p << " was never written";
        kept_norms.push_back(all[static_cast<size_t>(at - positions.begin())]);
      }
      EXPECT_TRUE(std::is_sorted(kept_positions.begin(), kept_positions.end())) << "storage order";
      std::vector<double> lowest = all;
      std::sort(lowest.begin(), lowest.end());
      lowest.resize(static_cast<size_t>(keep));
      std::sort(kept_norms.begin(), kept_norms.end());
      for (size_t i = 0; i < lowest.size(); ++i)
        EXPECT_NEAR(kept_norms[i], lowest[i], tie) << "layer " << l << " head " << h << " rank " << i;
      for (size_t i = 0; i < positions.size(); ++i)
        if (all[i] < lowest.back() - tie)
          EXPECT_NE(std::find(kept_positions.begin(), kept_positions.end(), positions[i]), kept_positions.end())
              << "layer " << l << " head " << h << " dropped position " << positions[i];
    }
  }
}

TEST(DecodingPress, EachBaseKeepsWhatItKeepsOfTheSameTokensAsOnePrompt) {
  // 60 prompt tokens, 20 decoded: at pass 20 the cache is cut to 48 entries. The base compressing the 80
  // tokens as one prompt to --budget 48 sees the same keys, values and last queries (SnapKV's window of 8).
  const int64_t prompt = 60, passes = 20, target = 48;
  const std::vector<int> ids = text_ids(prompt + passes);
  for (const std::string base : {"snapkv:window=8", "knorm", "keydiff", "lagkv:lag=8", "streaming_llm"}) {
    const auto colon = base.find(':');
    const std::string name = base.substr(0, colon);
    const std::string extra = colon == std::string::npos ? "" : "," + base.substr(colon + 1);
    const KVCache decoded =
        run(setup_for("decoding:base=" + name + extra + ",interval=20,target=" + std::to_string(target)), ids, prompt);
    const KVCache at_once = run(setup_for(base, target), ids, prompt + passes);
    for (int64_t l = 0; l < decoded.num_layers(); ++l) {
      const std::vector<at::Tensor> a = test::head_positions(decoded.layer(l));
      const std::vector<at::Tensor> b = test::head_positions(at_once.layer(l));
      ASSERT_EQ(a.size(), b.size());
      for (size_t h = 0; h < a.size(); ++h) {
        EXPECT_EQ(a[h].numel(), target);
        // Layer 0's keys before RoPE depend on the token alone: a repeated token ties exactly with its
        // earlier copies under a key-only score, and the two runs' last-bit differences break such ties
        // either way. There the kept sets may differ by copies of the same tokens; elsewhere they are equal.
        std::vector<int64_t> only_a, only_b;
        const std::vector<int64_t> va = as_vector(a[h]), vb = as_vector(b[h]);
        std::set_difference(va.begin(), va.end(), vb.begin(), vb.end(), std::back_inserter(only_a));
        std::set_difference(vb.begin(), vb.end(), va.begin(), va.end(), std::back_inserter(only_b));
        if (l > 0 || name == "snapkv") {
          EXPECT_EQ(va, vb) << base << " layer " << l << " head " << h;
          continue;
        }
        std::vector<int> tokens_a, tokens_b;
        for (int64_t p : only_a) tokens_a.push_back(ids[static_cast<size_t>(p)]);
        for (int64_t p : only_b) tokens_b.push_back(ids[static_cast<size_t>(p)]);
        std::sort(tokens_a.begin(), tokens_a.end());
        std::sort(tokens_b.begin(), tokens_b.end());
        EXPECT_EQ(tokens_a, tokens_b) << base << " layer 0 head " << h;
      }
    }
  }
}

// Records the attention of every decode pass's query (the model's column sums of a one-token pass).
class AttentionRecorder : public ForwardObserver {
 public:
  AttentionProbe probe(int64_t) const override { return {true, 0}; }
  void after_attention(const LayerStep& step, KVCache&) override {
    if (step.keys.size(1) == 1) passes[static_cast<size_t>(step.layer)].push_back(step.stats.column_sums.clone());
  }
  std::vector<std::vector<at::Tensor>> passes = std::vector<std::vector<at::Tensor>>(8);
};

TEST(CamPress, MergesEvictedValuesAsTheDefinitionSays) {
  // 40 prompt tokens, 12 decoded, then the cut to 30: the 12 highest-scored evicted entries (KNorm averaged
  // over heads) each fold value / |w| into the next 4 kept entries w with probability
  // clamp(A[c] / mean A[w], 0, 1), A the attention the decoded queries paid them (query heads averaged per KV
  // head), drawn as keyed_draw(seed, layer, head, position) < p. Computed here from an uncompressed run of the
  // same tokens. Layer 0 is left out: its keys depend on the token alone, so repeated tokens tie exactly.
  const int64_t prompt = 40, passes = 12, target = 30, window = 4;
  const uint64_t seed = 7;
  const std::vector<int> ids = text_ids(prompt + passes);
  const KVCache compressed = run(setup_for("cam:base=knorm,interval=12,target=30,merge=4,seed=7"), ids, prompt);
  const CacheSetup none = setup_for("none");
  KVCache full = none.new_cache(model());
  AttentionRecorder recorder;
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &recorder;
  model().forward(std::vector<int>(ids.begin(), ids.begin() + prompt), full, o);
  for (int64_t i = prompt; i < prompt + passes; ++i) model().forward({ids[static_cast<size_t>(i)]}, full, o);
  const int64_t S = prompt + passes, heads = model().config().num_heads, kv = model().config().num_kv_heads;
  int64_t merged = 0, declined = 0;
  for (int64_t l = 1; l < full.num_layers(); ++l) {
    const auto& dense = dynamic_cast<const DenseLayerCache&>(full.layer(l));
    const at::Tensor keys = dense.keys().to(at::kDouble), values = dense.values().to(at::kDouble);
    const at::Tensor positions = dense.positions();
    at::Tensor attention = at::zeros({kv, S}, at::kDouble);
    for (const at::Tensor& sums : recorder.passes[static_cast<size_t>(l)]) {
      const at::Tensor per_kv = sums.to(at::kDouble).reshape({kv, heads / kv, -1}).mean(1);
      attention.narrow(1, 0, per_kv.size(1)) += per_kv;
    }
    const at::Tensor score = (-keys.norm(2, -1)).mean(0);  // [S]
    std::vector<int64_t> order(static_cast<size_t>(S));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int64_t a, int64_t b) { return score[a].item<double>() > score[b].item<double>(); });
    std::vector<int64_t> kept(order.begin(), order.begin() + target), evicted(order.begin() + target, order.end());
    std::sort(kept.begin(), kept.end());
    evicted.resize(static_cast<size_t>(passes));  // already highest score first
    at::Tensor expected = values.clone();
    for (int64_t c : evicted) {
      const auto first = std::upper_bound(kept.begin(), kept.end(), c) - kept.begin();
      const int64_t size = std::min<int64_t>(window, target - first);
      for (int64_t h = 0; h < kv && size > 0; ++h) {
        double mean = 0;
        for (int64_t j = 0; j < size; ++j) mean += attention[h][kept[static_cast<size_t>(first + j)]].item<double>();
        const double p = std::clamp(attention[h][c].item<double>() / (mean / static_cast<double>(size)), 0.0, 1.0);
        if (!(keyed_draw(seed, l, h, positions[h][c].item<int64_t>()) < p)) {
          ++declined;
          continue;
        }
        ++merged;
        for (int64_t j = 0; j < size; ++j) expected[h][kept[static_cast<size_t>(first + j)]] += values[h][c] / size;
      }
    }
    const auto& got = dynamic_cast<const DenseLayerCache&>(compressed.layer(l));
    const at::Tensor kept_t = at::tensor(kept, at::kLong);
    for (int64_t h = 0; h < kv; ++h) {
      EXPECT_EQ(as_vector(got.positions()[h]), as_vector(positions[h].index_select(0, kept_t))) << "layer " << l;
      EXPECT_TRUE(at::allclose(got.values()[h].to(at::kDouble), expected[h].index_select(0, kept_t), 0, 1e-9))
          << "layer " << l << " head " << h;
    }
  }
  EXPECT_GT(merged, 0);
  EXPECT_GT(declined, 0);
}

TEST(DecodingPress, BadParametersAreOneLineErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"decoding:base=h2o", "base=h2o cannot score the cache while decoding"},
      {"decoding:base=expected_attention", "use one of"},
      {"decoding:interval=0", "interval must be >= 1"},
      {"decoding:target=0", "target must be >= 1"},
      {"decoding:fraction=1", "fraction must be in (0, 1)"},
      {"decoding:target=10,fraction=0.5", "not both"},
      {"decoding:base=knorm,window=3", "window"},
      {"decoding:merge=4", "merge= is a parameter of cam"},
      {"cam:merge=0", "merge must be >= 1"},
      {"cam:base=pyramidkv", "use one of"},
  };
  for (const auto& [press, fragment] : cases) {
    const std::string e = error_of(press);
    EXPECT_NE(e.find(fragment), std::string::npos) << press << ": " << e;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
  // A cache of blocks: CacheTypes.BlockFormatsRefuseWhatTheyCannotHold.
}

}  // namespace
}  // namespace kvc
