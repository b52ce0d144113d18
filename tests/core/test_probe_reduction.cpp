// Reductions of every query's attention rows (cache/probe_reduction.h) as the model's passes deliver
// them: the sum over queries of the squared KV-group mean of attention and each entry's largest
// probability, against loops over the rows a probe of every query returns, with the rows themselves
// trimmed to what the probe asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "cache/probe_reduction.h"
#include "model/forward_observer.h"
#include "support/stories260k.h"

namespace kvc {
namespace {

const LlamaModel& model() { return test::stories260k_float64(); }

// Asks every layer for `probe` and keeps each pass's statistics by layer.
struct Recorder : ForwardObserver {
  explicit Recorder(AttentionProbe p) : asked(p) {}
  AttentionProbe probe(int64_t) const override { return asked; }
  void after_attention(const LayerStep& step, KVCache&) override { stats.push_back(step.stats); }
  AttentionProbe asked;
  std::vector<AttentionStats> stats;  // one per layer and pass, in order
};

// Runs `ids` as a prompt, then `next` as one decode step, with `probe` asked of every layer.
Recorder run(const AttentionProbe& probe, const std::vector<int>& ids, int next) {
  Recorder recorder(probe);
  KVCache cache = model().new_cache();
  ForwardOptions o;
  o.all_logits = false;
  o.observer = &recorder;
  model().forward(ids, cache, o);
  model().forward({next}, cache, o);
  return recorder;
}

// Σ_t (mean over the G query heads of KV head kv of p[h][t][j])², by loops over the rows.
std::vector<double> brute_force_squares(const at::Tensor& rows, int64_t kv, int64_t G) {
  const at::Tensor p = rows.to(at::kDouble).contiguous();
  const int64_t T = p.size(1), S = p.size(2);
  std::vector<double> out(static_cast<size_t>(S), 0.0);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < S; ++j) {
      double mean = 0;
      for (int64_t g = 0; g < G; ++g) mean += p[kv * G + g][t][j].item<double>() / static_cast<double>(G);
      out[static_cast<size_t>(j)] += mean * mean;
    }
  }
  return out;
}

// max_t p[h][t][j], by loops over the rows.
std::vector<double> brute_force_max(const at::Tensor& rows, int64_t h) {
  const at::Tensor p = rows.to(at::kDouble).contiguous();
  std::vector<double> out(static_cast<size_t>(p.size(2)), 0.0);
  for (int64_t t = 0; t < p.size(1); ++t)
    for (int64_t j = 0; j < p.size(2); ++j)
      out[static_cast<size_t>(j)] = std::max(out[static_cast<size_t>(j)], p[h][t][j].item<double>());
  return out;
}

TEST(ProbeReduction, ReductionsEqualLoopsOverEveryQueryRowAndTheRowsAreTrimmed) {
  const ModelConfig& c = model().config();
  const int64_t S = 40, H = c.num_heads, KV = c.num_kv_heads, G = H / KV;
  const std::vector<int> ids = test::tinystories_prompt(S);
  const int next = ids[5];
  AttentionProbe every;
  every.window = kEveryQuery;
  const Recorder rows = run(every, ids, next);
  for (const int64_t window : {int64_t{0}, int64_t{3}}) {
    AttentionProbe asked;
    asked.window = window;
    asked.group_square_sums = true;
    asked.column_max = true;
    const Recorder reduced = run(asked, ids, next);
    ASSERT_EQ(reduced.stats.size(), rows.stats.size());
    for (size_t i = 0; i < rows.stats.size(); ++i) {
      const bool prefill = i < static_cast<size_t>(c.num_layers);
      SCOPED_TRACE("pass " + std::string(prefill ? "prefill" : "decode") + ", layer " +
                   std::to_string(i % static_cast<size_t>(c.num_layers)) + ", window " + std::to_string(window));
      const at::Tensor& full = rows.stats[i].window_probs;  // [H, T, entries]
      const AttentionStats& got = reduced.stats[i];
      ASSERT_EQ(full.size(1), prefill ? S : 1);
      ASSERT_TRUE(got.group_square_sums.defined());
      ASSERT_EQ(got.group_square_sums.sizes(), at::IntArrayRef({KV, full.size(2)}));
      // The rows are float32 (as every probe's), and so are the products before the float64 sums.
      for (int64_t kv = 0; kv < KV; ++kv) {
        const std::vector<double> want = brute_force_squares(full, kv, G);
        for (int64_t j = 0; j < full.size(2); ++j) {
          const double w = want[static_cast<size_t>(j)];
          EXPECT_NEAR(got.group_square_sums[kv][j].item<double>(), w, 1e-6 * std::max(1.0, w)) << kv << " " << j;
        }
      }
      ASSERT_TRUE(got.column_max.defined());
      ASSERT_EQ(got.column_max.sizes(), at::IntArrayRef({H, full.size(2)}));
      for (int64_t h = 0; h < H; ++h) {
        const std::vector<double> want = brute_force_max(full, h);
        for (int64_t j = 0; j < full.size(2); ++j)
          EXPECT_EQ(got.column_max[h][j].item<double>(), want[static_cast<size_t>(j)]) << h << " " << j;
      }
      if (window == 0) {
        EXPECT_FALSE(got.window_probs.defined());
      } else {
        const int64_t kept = std::min<int64_t>(window, full.size(1));
        ASSERT_TRUE(got.window_probs.defined());
        EXPECT_TRUE(at::equal(got.window_probs, full.narrow(1, full.size(1) - kept, kept)));
        // A copy of the asked rows, not a view keeping every query's rows alive.
        EXPECT_EQ(static_cast<int64_t>(got.window_probs.storage().nbytes()),
                  got.window_probs.numel() * got.window_probs.element_size());
      }
    }
  }
}

}  // namespace
}  // namespace kvc
