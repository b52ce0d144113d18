// RoCo (press/roco.cpp) against a plain reading of its rule (EasyKV's `roco` policy): the statistics of a
// prompt computed here from its queries and keys (RoPE, causal softmax, the KV group's mean, in float64),
// then entries evicted one at a time — the scope being the lowest standard deviations of attention, found
// by a full sort each time, and the least mean attention of the scope going — until the budget is met.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "press/press.h"
#include "press/press_registry.h"
#include "support/head_positions.h"
#include "support/stories260k.h"
#include "util/error.h"

namespace kvc {
namespace {

const LlamaModel& model() { return test::stories260k_float64(); }

struct Stats {
  std::vector<double> sum, squares;  // per entry, over every query that saw it
  std::vector<int64_t> positions;
};

// The entries (indices into stats) sequential eviction by RoCo's rule keeps.
std::set<int64_t> kept_by_rule(const Stats& s, int64_t budget, int64_t sinks, double margin, int64_t newest) {
  const auto S = static_cast<int64_t>(s.sum.size());
  const int64_t last = *std::max_element(s.positions.begin(), s.positions.end());
  std::vector<int64_t> by_age(static_cast<size_t>(S));
  std::iota(by_age.begin(), by_age.end(), 0);
  std::sort(by_age.begin(), by_age.end(), [&](int64_t a, int64_t b) { return s.positions[a] < s.positions[b]; });
  std::set<int64_t> guarded;
  for (int64_t i = 0; i < std::min(sinks, S); ++i) guarded.insert(by_age[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < std::min(newest, S); ++i) guarded.insert(by_age[static_cast<size_t>(S - 1 - i)]);
  std::vector<double> mean(static_cast<size_t>(S)), spread(static_cast<size_t>(S));
  for (int64_t i = 0; i < S; ++i) {
    const double n = static_cast<double>(last + 1 - s.positions[i]);
    mean[i] = s.sum[i] / n;
    spread[i] = std::sqrt(std::max(s.squares[i] / n - mean[i] * mean[i], 0.0));
  }
  const int64_t scope = std::max<int64_t>(budget - std::llround(margin * budget) - sinks, 1);
  std::set<int64_t> left;
  for (int64_t i = 0; i < S; ++i) left.insert(i);
  while (static_cast<int64_t>(left.size()) > budget) {
    std::vector<int64_t> open;
    for (int64_t i : left)
      if (!guarded.count(i)) open.push_back(i);
    std::sort(open.begin(), open.end(), [&](int64_t a, int64_t b) { return spread[a] < spread[b]; });
    open.resize(static_cast<size_t>(std::min<int64_t>(scope, static_cast<int64_t>(open.size()))));
    // Equal means: the entry stored first goes (the press breaks ties the same way).
    left.erase(*std::min_element(open.begin(), open.end(), [&](int64_t a, int64_t b) {
      return mean[a] < mean[b] || (mean[a] == mean[b] && a < b);
    }));
  }
  return left;
}

// The top `budget` entries of a scorer's row (the selection the press makes).
std::set<int64_t> top(const at::Tensor& row, int64_t budget) {
  const at::Tensor idx = std::get<1>(row.topk(budget));
  std::set<int64_t> out;
  for (int64_t i = 0; i < budget; ++i) out.insert(idx[i].item<int64_t>());
  return out;
}

at::Tensor score(const std::string& spec, const std::vector<Stats>& heads, int64_t budget) {
  const auto S = static_cast<int64_t>(heads[0].sum.size()), H = static_cast<int64_t>(heads.size());
  at::Tensor sum = at::empty({H, S}, at::kDouble), squares = at::empty({H, S}, at::kDouble),
             positions = at::empty({H, S}, at::kLong);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < S; ++i) {
      sum[h][i] = heads[h].sum[i];
      squares[h][i] = heads[h].squares[i];
      positions[h][i] = heads[h].positions[i];
    }
  ScoreInput in;
  in.prefill = false;
  in.positions = positions;
  in.cumulative = sum;
  in.cumulative_squares = squares;
  in.budget = budget;
  PressParams p = PressParams::parse(spec);
  p.budget = budget;
  return build_method_config(p).scorer->score(in);
}

// Statistics of a cache that has evicted while decoding: positions shuffled in storage, spreads and means of
// every size, some ties.
std::vector<Stats> random_heads(int64_t heads, int64_t S, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Stats> out(static_cast<size_t>(heads));
  for (auto& s : out) {
    std::vector<int64_t> pos(static_cast<size_t>(3 * S));
    std::iota(pos.begin(), pos.end(), 0);
    std::shuffle(pos.begin() + 4, pos.end() - 1, rng);  // the oldest and the newest positions stay held
    pos.resize(static_cast<size_t>(S - 1));
    pos.push_back(3 * S - 1);
    std::shuffle(pos.begin(), pos.end(), rng);
    const int64_t last = 3 * S - 1;
    for (int64_t p : pos) {
      const double n = static_cast<double>(last + 1 - p), m = u(rng) < 0.1 ? 0.25 : u(rng), sd = u(rng) * m;
      s.positions.push_back(p);
      s.sum.push_back(m * n);
      s.squares.push_back((sd * sd + m * m) * n);
    }
  }
  return out;
}

TEST(RoCo, ScoresRankEntriesAsEvictionOneAtATimeByItsRule) {
  for (const uint64_t seed : {1u, 2u, 3u}) {
    const std::vector<Stats> heads = random_heads(3, 90, seed);
    for (const auto& [spec, sinks, margin, newest] : std::vector<std::tuple<std::string, int64_t, double, int64_t>>{
             {"roco", 4, 0.1, 10}, {"roco:margin=0.3,sinks=0,newest=2", 0, 0.3, 2}, {"roco:margin=0.9", 4, 0.9, 10}}) {
      for (const int64_t budget : {89, 80, 45, 20}) {  // 89: a decode step's single eviction
        SCOPED_TRACE(spec + " seed " + std::to_string(seed) + " budget " + std::to_string(budget));
        const at::Tensor got = score(spec, heads, budget);
        for (size_t h = 0; h < heads.size(); ++h)
          EXPECT_EQ(top(got[static_cast<int64_t>(h)], budget), kept_by_rule(heads[h], budget, sinks, margin, newest));
      }
    }
  }
}

// A prompt's kept entries, layer by layer and head by head, against the rule applied to statistics computed
// here from the prefill's own queries and keys.
TEST(RoCo, PromptKeepsWhatItsRuleKeepsOnTheModelsOwnAttention) {
  const ModelConfig& c = model().config();
  const int64_t S = 72, G = c.num_heads / c.num_kv_heads;
  const std::vector<int> ids = test::tinystories_prompt(S);
  struct Recorder : ForwardObserver {
    void after_attention(const LayerStep& step, KVCache&) override { steps.push_back(step); }
    std::vector<LayerStep> steps;
  } recorder;
  // The uncompressed cache holds the prompt's keys as attention reads them (rotated), in prompt order.
  KVCache full = model().new_cache();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &recorder;
  model().forward(ids, full, o);
  struct Setting {
    std::string press;
    double ratio, margin;
  };
  const std::vector<Setting> settings{{"roco", 0.5, 0.1},
                                      {"roco", 0.25, 0.1},
                                      {"roco", 0.75, 0.1},
                                      {"roco:margin=0.5", 0.5, 0.5},
                                      {"roco:margin=0.6", 0.25, 0.6}};
  std::vector<KVCache> caches;
  for (const Setting& setting : settings) caches.push_back(test::prefill(model(), setting.press, setting.ratio, ids));
  for (const LayerStep& step : recorder.steps) {
    const at::Tensor q = step.queries.to(at::kDouble);  // [H, S, d], rotated
    const at::Tensor k = dynamic_cast<const DenseLayerCache&>(full.layer(step.layer)).keys().to(at::kDouble);
    for (int64_t kv = 0; kv < c.num_kv_heads; ++kv) {
      Stats s;
      s.sum.assign(S, 0);
      s.squares.assign(S, 0);
      for (int64_t i = 0; i < S; ++i) s.positions.push_back(i);
      for (int64_t t = 0; t < S; ++t) {
        std::vector<double> group(static_cast<size_t>(t + 1), 0);
        for (int64_t g = 0; g < G; ++g) {
          std::vector<double> logits(static_cast<size_t>(t + 1));
          double mx = -1e300;
          for (int64_t j = 0; j <= t; ++j) {
            logits[j] = at::dot(q[kv * G + g][t], k[kv][j]).item<double>() / std::sqrt(static_cast<double>(c.head_dim));
            mx = std::max(mx, logits[j]);
          }
          double z = 0;
          for (double& x : logits) z += (x = std::exp(x - mx));
          for (int64_t j = 0; j <= t; ++j) group[j] += logits[j] / z / static_cast<double>(G);
        }
        for (int64_t j = 0; j <= t; ++j) {
          s.sum[j] += group[j];
          s.squares[j] += group[j] * group[j];
        }
      }
      for (size_t i = 0; i < settings.size(); ++i) {
        const int64_t budget = std::llround((1 - settings[i].ratio) * S);
        const std::set<int64_t> expected = kept_by_rule(s, budget, 4, settings[i].margin, 10);
        const at::Tensor got = test::head_positions(caches[i].layer(step.layer))[static_cast<size_t>(kv)];
        std::set<int64_t> kept;
        for (int64_t j = 0; j < got.numel(); ++j) kept.insert(got[j].item<int64_t>());
        EXPECT_EQ(kept, expected) << settings[i].press << " at " << settings[i].ratio << ", layer " << step.layer
                                  << " KV head " << kv;
      }
    }
  }
}

TEST(RoCo, DecodingHoldsTheBudgetTheSinksAndTheNewest) {
  CompressionSpec spec;
  spec.press = "roco";
  spec.budget = 40;
  const CacheSetup setup = build_cache_setup(spec, model());
  const std::vector<int> text = test::tinystories_prompt(130);
  KVCache cache = setup.new_cache(model());
  auto observer = setup.new_observer();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model().forward(std::vector<int>(text.begin(), text.begin() + 100), cache, o);
  for (int64_t i = 100; i < 130; ++i) model().forward({text[static_cast<size_t>(i)]}, cache, o);
  for (int64_t l = 0; l < cache.num_layers(); ++l)
    for (const at::Tensor& p : test::head_positions(cache.layer(l))) {
      ASSERT_EQ(p.numel(), 40);
      for (int64_t q : {0, 1, 2, 3, 120, 125, 129}) EXPECT_TRUE((p == q).any().item<bool>()) << l << " lost " << q;
    }
}

TEST(RoCo, BadParametersAreOneLineErrors) {
  for (const char* spec : {"roco:margin=1", "roco:margin=-0.1", "roco:sinks=-1", "roco:newest=-2", "roco:agg=max",
                           "roco:recent=0.1", "decoding:base=roco,interval=8,target=16"}) {
    CompressionSpec s;
    s.press = spec;
    s.ratio = 0.5;
    EXPECT_THROW(build_cache_setup(s, model()), Error) << spec;
  }
}

}  // namespace
}  // namespace kvc
