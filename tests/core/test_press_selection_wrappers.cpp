// Presses that select around a base scorer by a rule of their own — ChunkKV's whole chunks, DMS-style
// thresholds, FINCH's question window; merging's values are data/parity's — checked against brute-force selections
// computed here from the uncompressed cache (KNorm's score is minus a key's norm, which RoPE leaves unchanged), and
// their bad parameters against one-line errors. Kept sets equal to kvpress' are data/parity's (test_press_parity.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "compression/compression_spec.h"
#include "model/llama_model.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/stories260k.h"
#include "util/error.h"

namespace kvc {
namespace {

// In float64 the stored (rotated) keys' norms equal the pre-RoPE norms KNorm scores to rounding.
const LlamaModel& model() { return test::stories260k_float64(); }

std::vector<int> prompt(int64_t n) { return test::tinystories_prompt(n); }

KVCache prefill(const std::string& press, double ratio, const std::vector<int>& ids) {
  return test::prefill(model(), press, ratio, ids);
}

// KNorm's scores of the uncompressed prompt: [n_kv, S] minus each stored key's norm.
at::Tensor knorm_scores(const KVCache& full, int64_t layer) {
  const auto& dense = dynamic_cast<const DenseLayerCache&>(full.layer(layer));
  return -dense.keys().to(at::kDouble).norm(2, -1);
}

std::vector<int64_t> as_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::string error_of(const std::string& press, double ratio) {
  try {
    CompressionSpec spec;
    spec.press = press;
    spec.ratio = ratio;
    build_cache_setup(spec, model());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(ChunkKV, KeepsTheTopWholeChunksForEveryHead) {
  // 203 tokens in chunks of 20: 10 whole chunks and one of 3. At ratio 0.5 the budget is 102 entries, so
  // floor(11 × 102 / 203) = 5 chunks stay.
  const int64_t S = 203, size = 20, chunks = 11, kept_chunks = 5;
  const auto ids = prompt(S);
  const KVCache full = prefill("none", 0.0, ids);
  const KVCache cache = prefill("chunkkv:base=knorm,size=20", 0.5, ids);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    // A chunk's score: KNorm summed over KV heads, averaged over the chunk's own tokens.
    const at::Tensor per_token = knorm_scores(full, l).sum(0);
    std::vector<double> score;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t len = std::min(size, S - c * size);
      score.push_back(per_token.narrow(0, c * size, len).mean().item<double>());
    }
    std::vector<int64_t> order(chunks);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return score[a] > score[b]; });
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < kept_chunks; ++i)
      for (int64_t t = order[i] * size; t < std::min(S, (order[i] + 1) * size); ++t) expected.push_back(t);
    std::sort(expected.begin(), expected.end());
    for (const at::Tensor& head : test::head_positions(cache.layer(l))) EXPECT_EQ(as_vector(head), expected);
  }
}

// Passes each layer's step on to the press, first noting KNorm's score of every token fed after the prompt (in
// layers past the first, a decoded token's key depends on the compressed cache, so the uncompressed run's
// differs).
class FedKeyNorms : public ForwardObserver {
 public:
  explicit FedKeyNorms(ForwardObserver* press) : press_(press) {}
  AttentionProbe probe(int64_t layer) const override { return press_->probe(layer); }
  void after_attention(const LayerStep& step, KVCache& cache) override {
    if (passes_ > 0) {
      if (scores.size() <= static_cast<size_t>(step.layer)) scores.resize(static_cast<size_t>(step.layer) + 1);
      auto& layer = scores[static_cast<size_t>(step.layer)];
      const at::Tensor s = -step.keys.to(at::kDouble).norm(2, -1);  // [n_kv, T]
      layer = layer.defined() ? at::cat({layer, s}, 1) : s;
    }
    press_->after_attention(step, cache);
    if (step.layer + 1 == static_cast<int64_t>(model().config().num_layers)) ++passes_;
  }
  std::vector<at::Tensor> scores;  // per layer [n_kv, tokens fed after the prompt]

 private:
  ForwardObserver* press_;
  int64_t passes_ = 0;
};

// decoding=1: every token fed after the prompt is scored on its own, and once it (or a prompt token) leaves the
// window it stays only where it scored at least the threshold; at the end each head holds exactly that.
TEST(ThresholdEviction, WhileDecodingEachTokenLeavingTheWindowStaysOnlyAboveTheThreshold) {
  const int64_t S = 120, fed = 40, window = 16;
  const auto ids = prompt(S + fed);
  const KVCache full = prefill("none", 0.0, ids);
  const at::Tensor sorted = std::get<0>(knorm_scores(full, 0).flatten().sort());
  const int64_t mid = sorted.numel() / 2;
  const double threshold = (sorted[mid].item<double>() + sorted[mid + 1].item<double>()) / 2;
  CompressionSpec spec;
  spec.press = fmt::format("dms:base=knorm,threshold={:.17g},window={},decoding=1", threshold, window);
  const CacheSetup setup = build_cache_setup(spec, model());
  KVCache cache = setup.new_cache(model());
  auto press = setup.new_observer();
  FedKeyNorms observer(press.get());
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &observer;
  model().forward(std::vector<int>(ids.begin(), ids.begin() + S), cache, o);
  for (int64_t t = S; t < S + fed; ++t) model().forward({ids[static_cast<size_t>(t)]}, cache, o);
  const int64_t total = S + fed;
  int64_t evicted_after_prompt = 0;
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    // The prompt's scores from the uncompressed prefill (the same pass), the fed tokens' as the press saw them.
    const at::Tensor scores =
        at::cat({knorm_scores(full, l).narrow(1, 0, S), observer.scores[static_cast<size_t>(l)]}, 1);
    const auto heads = test::head_positions(cache.layer(l));
    for (int64_t h = 0; h < scores.size(0); ++h) {
      std::vector<int64_t> expected;
      for (int64_t t = 0; t < total; ++t) {
        if (t >= total - window || scores[h][t].item<double>() >= threshold) expected.push_back(t);
        else evicted_after_prompt += t >= S - window;
      }
      EXPECT_EQ(as_vector(heads[static_cast<size_t>(h)]), expected) << "layer " << l << " head " << h;
    }
  }
  EXPECT_GT(evicted_after_prompt, 0) << "nothing was evicted while decoding: the decoding path went untested";
}

TEST(ThresholdEviction, KeepsWhatScoresAtLeastTheThresholdAndTheWindow) {
  const int64_t S = 160, window = 24;
  const auto ids = prompt(S);
  const KVCache full = prefill("none", 0.0, ids);
  // A threshold halfway between two neighbouring scores near the median of layer 0, so no key sits on it.
  const at::Tensor sorted = std::get<0>(knorm_scores(full, 0).flatten().sort());
  const int64_t mid = sorted.numel() / 2;
  const double threshold = (sorted[mid].item<double>() + sorted[mid + 1].item<double>()) / 2;
  const KVCache cache = prefill(fmt::format("dms:base=knorm,threshold={:.17g},window={}", threshold, window), 0.0, ids);
  std::set<int64_t> counts;
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    const at::Tensor scores = knorm_scores(full, l);
    const auto heads = test::head_positions(cache.layer(l));
    ASSERT_EQ(static_cast<int64_t>(heads.size()), scores.size(0));
    for (int64_t h = 0; h < scores.size(0); ++h) {
      std::vector<int64_t> expected;
      for (int64_t t = 0; t < S; ++t)
        if (t >= S - window || scores[h][t].item<double>() >= threshold) expected.push_back(t);
      EXPECT_EQ(as_vector(heads[static_cast<size_t>(h)]), expected) << "layer " << l << " head " << h;
      counts.insert(static_cast<int64_t>(expected.size()));
    }
  }
  EXPECT_GT(counts.size(), 1u) << "every head kept as many entries: the per-head layout went untested";
}

TEST(Finch, ReRotatesWhatTheUnrotatedSelectionKeeps) {
  // rerotate=1 (the default, as kvpress) keeps the same entries as rerotate=0, moved to positions 0..n−1.
  const auto ids = prompt(160);
  const KVCache plain = prefill("finch:window=16,rerotate=0", 0.5, ids);
  const KVCache moved = prefill("finch:window=16", 0.5, ids);
  for (int64_t l = 0; l < model().config().num_layers; ++l) {
    const auto kept = test::head_positions(plain.layer(l));
    const auto now = test::head_positions(moved.layer(l));
    for (size_t h = 0; h < kept.size(); ++h) {
      EXPECT_EQ(kept[h].numel(), 80);
      EXPECT_TRUE(now[h].equal(at::arange(kept[h].numel(), now[h].options())));
      // The question (the last 16 tokens) is always kept.
      EXPECT_TRUE(kept[h].narrow(0, kept[h].numel() - 16, 16).equal(at::arange(144, 160, kept[h].options())));
    }
    const auto& a = dynamic_cast<const DenseLayerCache&>(plain.layer(l));
    const auto& b = dynamic_cast<const DenseLayerCache&>(moved.layer(l));
    EXPECT_TRUE(a.values().equal(b.values()));  // only the keys move
    EXPECT_FALSE(a.keys().equal(b.keys()));
  }
}

TEST(SelectionWrappers, BadParametersAreOneLineErrors) {
  EXPECT_NE(error_of("chunkkv:base=h2o", 0.5).find("not a prompt-time scorer"), std::string::npos);
  EXPECT_NE(error_of("chunkkv:size=0", 0.5).find("size must be >= 1"), std::string::npos);
  EXPECT_NE(error_of("chunkkv:base=chunkkv", 0.5).find("base cannot be"), std::string::npos);
  EXPECT_NE(error_of("dms:threshold=-1", 0.5).find("drop --ratio/--budget"), std::string::npos);
  EXPECT_NE(error_of("dms", 0.0).find("needs threshold="), std::string::npos);
  EXPECT_NE(error_of("dms:threshold=-1,decoding=1,base=snapkv", 0.0).find("reads attention statistics"),
            std::string::npos);
  EXPECT_NE(error_of("dms:threshold=-1,base=ada", 0.0).find("not a prompt-time scorer"), std::string::npos);
  EXPECT_NE(error_of("dms:threshold=x", 0.0).find("threshold=x is not a number"), std::string::npos);
  EXPECT_NE(error_of("finch:window=0", 0.5).find("window"), std::string::npos);
  EXPECT_NE(error_of("finch:chunk=-1", 0.5).find("chunk must be >= 0"), std::string::npos);
  EXPECT_NE(error_of("finch:windw=8", 0.5).find("unknown parameter 'windw'"), std::string::npos);
  EXPECT_NE(error_of("merging:similarity=2", 0.5).find("similarity must be in [0, 1]"), std::string::npos);
  EXPECT_NE(error_of("merging:fraction=0", 0.5).find("fraction must be in (0, 1]"), std::string::npos);
  EXPECT_NE(error_of("merging:base=d2o", 0.5).find("without merging"), std::string::npos);
  EXPECT_NE(error_of("merging:base=ada", 0.5).find("one count per head"), std::string::npos);
  for (const std::string& bad : {"chunkkv:base=h2o", "dms", "finch:window=0", "merging:fraction=0"})
    EXPECT_EQ(error_of(bad, bad == "dms" ? 0.0 : 0.5).find('\n'), std::string::npos) << bad;
}

}  // namespace
}  // namespace kvc
