// LU-KV: the allocation's parts against brute force (the concave envelope against its definition, the greedy
// allocation against every allocation of small budgets), the profile's utility curves against an oracle
// computed here from the model's own queries, keys and values, and the press's kept sets against the top
// entries of its scorer at the curve's per-head counts. Kept sets equal to kvpress' LUKVPress are
// data/parity's (test_press_parity.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <random>

#include <unistd.h>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "io/safetensors.h"
#include "model/linear_weight.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "press/lukv_allocation.h"
#include "press/lukv_profile.h"
#include "press/press.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/stories260k.h"
#include "util/error.h"

namespace kvc {
namespace {

// A folder of this test's own, removed with what it holds.
struct TempDir {
  TempDir() {
    static int count = 0;
    dir = std::filesystem::temp_directory_path() /
          ("kvc_lukv_" + std::to_string(::getpid()) + "_" + std::to_string(count++));
    std::filesystem::create_directories(dir);
  }
  ~TempDir() { std::filesystem::remove_all(dir); }
  std::string path() const { return dir.string(); }
  std::filesystem::path dir;
};

std::vector<double> random_curve(std::mt19937& rng, int64_t n) {
  std::uniform_real_distribution<double> step(0.0, 1.0);
  std::vector<double> u(static_cast<size_t>(n));
  double sum = 0;
  for (auto& x : u) x = (sum += step(rng));  // increasing, neither concave nor convex
  for (auto& x : u) x = (x - u[0]) / (sum - u[0]);
  return u;
}

TEST(LukvAllocation, EnvelopeIsTheLeastConcaveMajorant) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    const std::vector<double> u = random_curve(rng, 15);
    const std::vector<double> env = upper_concave_envelope(u);
    const auto n = static_cast<int64_t>(u.size());
    for (int64_t i = 0; i < n; ++i) {
      // By definition: the highest chord between two points on either side of i.
      double best = u[i];
      for (int64_t a = 0; a <= i; ++a)
        for (int64_t b = i; b < n; ++b)
          if (a < b)
            best = std::max(best, u[a] + (u[b] - u[a]) * static_cast<double>(i - a) / static_cast<double>(b - a));
      EXPECT_NEAR(env[i], best, 1e-12) << "trial " << trial << " point " << i;
    }
  }
}

TEST(LukvAllocation, GreedyUnitsMaximiseTheSumOfTheEnvelopes) {
  std::mt19937 rng(11);
  const int64_t heads = 3, grid = 6;
  for (int trial = 0; trial < 10; ++trial) {
    at::Tensor utility = at::empty({heads, grid + 1}, at::kDouble);
    std::vector<std::vector<double>> env;
    for (int64_t h = 0; h < heads; ++h) {
      const std::vector<double> u = random_curve(rng, grid + 1);
      for (int64_t g = 0; g <= grid; ++g) utility[h][g] = u[g];
      env.push_back(upper_concave_envelope(u));
    }
    for (int64_t total = 0; total <= heads * grid; ++total) {
      double best = -1;
      for (int64_t a = 0; a <= grid; ++a)
        for (int64_t b = 0; b <= grid; ++b) {
          const int64_t c = total - a - b;
          if (c >= 0 && c <= grid) best = std::max(best, env[0][a] + env[1][b] + env[2][c]);
        }
      const at::Tensor units = allocate_budget_units(utility, total);
      EXPECT_EQ(units.sum().item<int64_t>(), total);
      double got = 0;
      for (int64_t h = 0; h < heads; ++h) got += env[h][units[h].item<int64_t>()];
      EXPECT_NEAR(got, best, 1e-12) << "trial " << trial << " total " << total;
    }
  }
}

TEST(LukvAllocation, PruneCurveSpendsEachRatiosBudgetAndGrowsWithTheRatio) {
  std::mt19937 rng(3);
  const int64_t heads = 5, grid = 100;
  at::Tensor utility = at::empty({heads, grid + 1}, at::kDouble);
  for (int64_t h = 0; h < heads; ++h) {
    const std::vector<double> u = random_curve(rng, grid + 1);
    for (int64_t g = 0; g <= grid; ++g) utility[h][g] = u[g];
  }
  const at::Tensor prune = lukv_prune_curve(utility);
  ASSERT_EQ(prune.sizes(), (at::IntArrayRef{99, heads}));
  for (int64_t t = 1; t <= 99; ++t) {
    EXPECT_NEAR(prune[t - 1].mean().item<double>(), t / 100.0, 0.5 / (heads * grid) + 1e-12) << t;
    if (t > 1) EXPECT_TRUE((prune[t - 1] >= prune[t - 2]).all().item<bool>()) << t;
  }
}

TEST(LukvAllocation, RetainedShareFollowsTheRanking) {
  // Ranking keeps entry 2, then 0, then 3, then 1; oracle mass 1, 2, 3, 4 (total 10).
  const at::Tensor ranking = at::tensor({5.0, 1.0, 9.0, 3.0}, at::kDouble).view({1, 4});
  const at::Tensor oracle = at::tensor({1.0, 2.0, 3.0, 4.0}, at::kDouble).view({1, 4});
  const at::Tensor u = retained_oracle_share(ranking, oracle, 4);
  const std::vector<double> expected{0.0, 0.3, 0.4, 0.8, 1.0};
  for (int64_t g = 0; g <= 4; ++g) EXPECT_NEAR(u[0][g].item<double>(), expected[g], 1e-15) << g;
}

TEST(LukvAllocation, HeadCountsRoundAsKvpress) {
  // ideal 5, 7.5, 2 (sum 14.5 rounds to even 14): the floors already hold it.
  EXPECT_EQ(lukv_head_keep(at::tensor({0.5, 0.25, 0.8}, at::kFloat), 10), (std::vector<int64_t>{5, 7, 2}));
  // ideal 5.5, 5.5 (sum 11): one more to the first of the tied fractions.
  EXPECT_EQ(lukv_head_keep(at::tensor({0.45, 0.45}, at::kFloat), 10), (std::vector<int64_t>{6, 5}));
  // every head keeps at least one entry.
  EXPECT_EQ(lukv_head_keep(at::tensor({1.0, 1.0}, at::kFloat), 10), (std::vector<int64_t>{1, 1}));
}

const LlamaModel& model() { return test::stories260k_float64(); }

// The queries and output projection of every layer of one pass.
class QueryCapture : public ForwardObserver {
 public:
  void after_attention(const LayerStep& step, KVCache&) override {
    queries.push_back(step.queries.clone());
    w_o.push_back(step.output_projection->dense());
  }
  std::vector<at::Tensor> queries, w_o;
};

TEST(LukvProfile, UtilityIsTheShareOfTheOracleMassTheRankingKeeps) {
  const LlamaModel& m = model();
  const int64_t S = 60, K = 20, KV = m.config().num_kv_heads, H = m.config().num_heads;
  const std::vector<int> ids = test::tinystories_prompt(S + K);
  LukvProfileOptions o;
  o.press = "knorm";
  o.context = S;
  o.horizon = K;
  o.windows = 1;
  o.grid = 10;
  o.show_progress = false;
  const LukvProfile profile = profile_lukv(m, ids, o);

  // The oracle by hand: softmax of the rotated queries against the cached (rotated) keys, causal.
  KVCache cache = m.new_cache();
  QueryCapture capture;
  ForwardOptions fo;
  fo.all_logits = false;
  fo.observer = &capture;
  m.forward(ids, cache, fo);
  for (int64_t l = 0; l < m.config().num_layers; ++l) {
    const auto& dense = dynamic_cast<const DenseLayerCache&>(cache.layer(l));
    const at::Tensor keys = dense.keys().narrow(1, 0, S + K), values = dense.values().narrow(1, 0, S + K);
    const int64_t d = keys.size(2), group = H / KV;
    at::Tensor oracle = at::zeros({KV, S}, at::kDouble);
    for (int64_t i = 0; i < H; ++i) {
      const at::Tensor q = capture.queries[l][i].narrow(0, S, K);                                  // [K, d]
      at::Tensor logits = at::matmul(q, keys[i / group].t()) / std::sqrt(static_cast<double>(d));  // [K, S + K]
      for (int64_t k = 0; k < K; ++k) logits[k].narrow(0, S + k + 1, K - k - 1).fill_(-INFINITY);
      const at::Tensor probs = at::softmax(logits, -1).narrow(1, 0, S);
      const at::Tensor norms =
          at::matmul(values[i / group].narrow(0, 0, S), capture.w_o[l].narrow(1, i * d, d).t()).norm(2, -1);
      oracle[i / group] = at::maximum(oracle[i / group], std::get<0>(probs.max(0)) * norms);
    }
    // KNorm's ranking: minus the key's norm (RoPE keeps it to rounding, which the rounding to 1e-9 here
    // removes: a token repeated in the prompt ties with itself, the older first), the 4 oldest and the newest
    // protected.
    const at::Tensor ranking = protect_ends((-keys.narrow(1, 0, S).norm(2, -1) * 1e9).round(), 4, 1);
    const at::Tensor expected = retained_oracle_share(ranking, oracle, o.grid);
    // The profile's attention probabilities are float32.
    EXPECT_TRUE(at::allclose(profile.utility[l], expected, 0, 1e-5)) << "layer " << l << "\n"
                                                                     << profile.utility[l] << "\n"
                                                                     << expected;
  }
  EXPECT_EQ(profile.prune.sizes(), (at::IntArrayRef{99, m.config().num_layers, KV}));
}

// A curve file as kvc-profile writes it, with shares chosen here; `changed` replaces metadata fields (an empty
// value leaves the field out), and `tensor` names the shares.
std::string write_curve(const std::string& dir, const at::Tensor& prune, const std::string& press,
                        const std::map<std::string, std::string>& changed = {},
                        const std::string& tensor = "lukv_prune") {
  std::map<std::string, std::string> meta{
      {"lukv_press", press}, {"lukv_sink", "4"}, {"lukv_recent", "1"}, {"config_hash", model().config().config_hash}};
  for (const auto& [key, value] : changed) meta[key] = value;
  st::SafetensorsWriter w;
  add_tensor(w, tensor, prune.to(at::kFloat));
  for (const auto& [key, value] : meta)
    if (!value.empty()) w.set_metadata(key, value);
  static int count = 0;
  const std::string path = dir + "/lukv" + std::to_string(count++) + ".safetensors";
  w.write(path);
  return path;
}

TEST(LukvPress, EachHeadKeepsItsCurveCountOfTheScorersTopEntries) {
  const LlamaModel& m = model();
  const int64_t L = m.config().num_layers, KV = m.config().num_kv_heads, S = 100;
  TempDir dir;
  // Heads prune different shares around the ratio.
  at::Tensor prune = at::empty({99, L, KV}, at::kDouble);
  for (int64_t t = 0; t < 99; ++t)
    for (int64_t l = 0; l < L; ++l)
      for (int64_t h = 0; h < KV; ++h)
        prune[t][l][h] = std::clamp((t + 1) / 100.0 + 0.1 * ((l + h) % 3 - 1), 0.0, 0.98);
  const std::string path = write_curve(dir.path(), prune, "knorm");
  const std::vector<int> ids = test::tinystories_prompt(S);
  const KVCache full = test::prefill(m, "none", 0.0, ids);
  for (double ratio : {0.25, 0.5, 0.9}) {
    const KVCache cache = test::prefill(m, "lukv:curve=" + path, ratio, ids);
    const auto row = static_cast<int64_t>(std::lround(ratio * 100)) - 1;
    for (int64_t l = 0; l < L; ++l) {
      const auto& dense = dynamic_cast<const DenseLayerCache&>(full.layer(l));
      const at::Tensor scores = protect_ends(-dense.keys().narrow(1, 0, S).to(at::kDouble).norm(2, -1), 4, 1);
      const std::vector<int64_t> keep = lukv_head_keep(prune[row][l], S);
      const std::vector<at::Tensor> heads = test::head_positions(cache.layer(l));
      ASSERT_EQ(static_cast<int64_t>(heads.size()), KV);
      for (int64_t h = 0; h < KV; ++h) {
        // The curve's count, and no evicted entry scoring above a kept one (tokens repeated in the prompt tie).
        const at::Tensor kept = heads[h].to(at::kLong);
        ASSERT_EQ(kept.numel(), keep[h]) << "ratio " << ratio << " layer " << l << " head " << h;
        const at::Tensor evicted = at::ones({S}, at::kBool).index_fill_(0, kept, false);
        if (!evicted.any().item<bool>()) continue;
        EXPECT_GE(scores[h].index_select(0, kept).min().item<double>(),
                  scores[h].masked_select(evicted).max().item<double>() - 1e-9)
            << "ratio " << ratio << " layer " << l << " head " << h;
      }
    }
  }
}

std::string error_of(const std::string& press) {
  try {
    CompressionSpec spec;
    spec.press = press;
    spec.ratio = 0.5;
    build_cache_setup(spec, model());
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LukvPress, BadCurvesAreOneLineErrors) {
  TempDir dir;
  const int64_t L = model().config().num_layers, KV = model().config().num_kv_heads;
  EXPECT_NE(error_of("lukv").find("needs curve=FILE"), std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + dir.path() + "/absent.safetensors").find("absent.safetensors"), std::string::npos);
  const std::string wrong_shape = write_curve(dir.path(), at::full({99, L + 1, KV}, 0.5, at::kDouble), "knorm");
  EXPECT_NE(error_of("lukv:curve=" + wrong_shape).find("curve for"), std::string::npos);
  const std::string bounded = write_curve(dir.path(), at::full({99, L, KV}, 0.5, at::kDouble), "h2o");
  EXPECT_NE(error_of("lukv:curve=" + bounded).find("not a prompt-time scorer"), std::string::npos);
  const std::string good = write_curve(dir.path(), at::full({99, L, KV}, 0.5, at::kDouble), "knorm");
  EXPECT_NE(error_of("lukv:curve=" + good + ",base=snapkv").find("unknown parameter 'base'"), std::string::npos);
  const at::Tensor half = at::full({99, L, KV}, 0.5, at::kDouble);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), half, "knorm", {}, "shares")).find("no 'lukv_prune'"),
            std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), at::full({99, L, KV}, 1.5, at::kDouble), "knorm"))
                .find("outside [0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), half, "")).find("no lukv_press"), std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), at::full({10, L}, 0.5, at::kDouble), "knorm"))
                .find("must be [99, layers, KV heads]"),
            std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), half, "knorm", {{"lukv_sink", "x"}})).find("not a count"),
            std::string::npos);
  EXPECT_NE(error_of("lukv:curve=" + write_curve(dir.path(), half, "knorm", {{"config_hash", "0123"}}))
                .find("made for another model"),
            std::string::npos);
  for (const std::string& bad : {std::string("lukv"), "lukv:curve=" + wrong_shape})
    EXPECT_EQ(error_of(bad).find('\n'), std::string::npos) << bad;
}

std::string profile_error(const LukvProfileOptions& o, int64_t tokens) {
  try {
    profile_lukv(model(), test::tinystories_prompt(tokens), o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(LukvProfile, BadOptionsAreOneLineErrors) {
  LukvProfileOptions o;
  o.context = 40;
  o.horizon = 10;
  o.windows = 1;
  o.show_progress = false;
  o.press = "h2o";
  EXPECT_NE(profile_error(o, 60).find("allocates or evicts on its own"), std::string::npos);
  o.press = "";
  EXPECT_NE(profile_error(o, 60).find("needs a press spec"), std::string::npos);
  o.press = "knorm";
  EXPECT_NE(profile_error(o, 45).find("needs at least --ctx-size + --lukv-horizon = 50"), std::string::npos);
  o.horizon = 0;
  EXPECT_NE(profile_error(o, 60).find("--lukv-horizon must be at least 1"), std::string::npos);
  o.horizon = 10;
  o.sink = -1;
  EXPECT_NE(profile_error(o, 60).find("--lukv-sink and --lukv-recent must be >= 0"), std::string::npos);
}

}  // namespace
}  // namespace kvc
