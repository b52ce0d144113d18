// The attention routine every cache layout shares, against attention written out one query at a time
// in float64: outputs and masks (causal prefill, sliding window, entries out of position order, entries
// after the query), the probe's statistics, keys read in blocks of any size, the gradient gate training
// needs, and the low-rank layout over several key blocks.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "cache/blocked_attention.h"
#include "core/rope.h"
#include "lowrank/lowrank_layer_cache.h"
#include "support/brute_force_attention.h"

namespace kvc {
namespace {

using test::brute_force_attention;

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// Dense entries handed out in key blocks of a chosen size, recording which ranges were read.
class BlockReadEntries : public EntryBlocks {
 public:
  BlockReadEntries(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions, int64_t block)
      : dense_(keys, values, positions), block_(block) {}
  const at::Tensor& positions() const override { return dense_.positions(); }
  int64_t key_block(int64_t) const override { return block_; }
  at::Tensor keys(int64_t s0, int64_t s1) override {
    reads.emplace_back(s0, s1);
    return dense_.keys(s0, s1);
  }
  at::Tensor weigh_values(const at::Tensor& probs) override { return dense_.weigh_values(probs); }
  std::vector<std::pair<int64_t, int64_t>> reads;

 private:
  DenseEntries dense_;
  int64_t block_;
};

class BlockedAttention : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(11); }
  static constexpr int64_t kH = 4, kKv = 2, kD = 8;
};

TEST_F(BlockedAttention, CausalPrefillMatchesBruteForceWithAnyKeyBlock) {
  constexpr int64_t S = 10;
  const at::Tensor q = at::randn({kH, S, kD}, kF64), k = at::randn({kKv, S, kD}, kF64),
                   v = at::randn({kKv, S, kD}, kF64);
  const at::Tensor pos = at::arange(S, at::kLong);
  for (const int64_t window : {int64_t{0}, int64_t{4}}) {
    const at::Tensor want = brute_force_attention(q, pos, k, v, pos.expand({kKv, S}), window);
    for (const int64_t block : {1, 3, 7, 100}) {
      BlockReadEntries entries(k, v, pos.unsqueeze(0), block);
      const at::Tensor got = blocked_attention({kH, kKv, kD, window}, q, pos, entries, {}, nullptr);
      EXPECT_TRUE(at::allclose(got, want, 1e-12, 1e-12)) << "window " << window << ", block " << block;
      // Blocks are read in order, none longer than asked for, and together they cover every entry.
      int64_t next = 0;
      for (const auto& [s0, s1] : entries.reads) {
        EXPECT_EQ(s0, next);
        EXPECT_LE(s1 - s0, block);
        next = s1;
      }
      EXPECT_EQ(next, S);
    }
  }
}

// Entries in no particular order, some after the queries: the mask is decided per entry, and the
// probe's column sums and last-window probabilities are the brute-force probabilities.
TEST_F(BlockedAttention, OutOfOrderEntriesAndProbeStatisticsMatchBruteForce) {
  constexpr int64_t S = 12, T = 3;
  const at::Tensor k = at::randn({kKv, S, kD}, kF64), v = at::randn({kKv, S, kD}, kF64);
  const at::Tensor k_pos = at::stack({at::randperm(S, at::kLong) * 2, at::randperm(S, at::kLong) * 2});  // 0..22
  const at::Tensor q = at::randn({kH, T, kD}, kF64);
  const at::Tensor q_pos = at::tensor(std::vector<int64_t>{14, 15, 16}, at::kLong);
  for (const int64_t window : {int64_t{0}, int64_t{9}}) {
    at::Tensor probs;
    const at::Tensor want = brute_force_attention(q, q_pos, k, v, k_pos, window, &probs);
    AttentionProbe probe;
    probe.column_sums = true;
    probe.window = 2;
    AttentionStats stats;
    BlockReadEntries entries(k, v, k_pos, 5);
    const at::Tensor got = blocked_attention({kH, kKv, kD, window}, q, q_pos, entries, probe, &stats);
    EXPECT_TRUE(at::allclose(got, want, 1e-12, 1e-12)) << "window " << window;
    EXPECT_TRUE(at::allclose(stats.column_sums.to(at::kDouble), probs.sum(1), 1e-6, 1e-6));
    EXPECT_TRUE(at::allclose(stats.window_probs.to(at::kDouble), probs.narrow(1, T - 2, 2), 1e-6, 1e-6));
  }
  // One decoding query: entries after it must still be masked (the routine reads the largest position).
  const at::Tensor one = at::randn({kH, 1, kD}, kF64), at_10 = at::tensor(std::vector<int64_t>{10}, at::kLong);
  BlockReadEntries entries(k, v, k_pos, S);
  EXPECT_TRUE(at::allclose(blocked_attention({kH, kKv, kD, 0}, one, at_10, entries, {}, nullptr),
                           brute_force_attention(one, at_10, k, v, k_pos, 0), 1e-12, 1e-12));
}

// Gate training backpropagates through this routine: its gradient with respect to queries, keys and
// values is the gradient of attention written with plain differentiable operations.
TEST_F(BlockedAttention, GradientsMatchThoseOfPlainAttention) {
  constexpr int64_t S = 9;
  const at::Tensor pos = at::arange(S, at::kLong);
  const at::Tensor weights = at::randn({kH, S, kD}, kF64);
  std::vector<at::Tensor> grads[2];
  for (int run = 0; run < 2; ++run) {
    at::manual_seed(3);
    const at::Tensor q = at::randn({kH, S, kD}, kF64).requires_grad_();
    const at::Tensor k = at::randn({kKv, S, kD}, kF64).requires_grad_();
    const at::Tensor v = at::randn({kKv, S, kD}, kF64).requires_grad_();
    at::Tensor out;
    if (run == 0) {
      DenseEntries entries(k, v, pos.unsqueeze(0));
      out = blocked_attention({kH, kKv, kD, 3}, q, pos, entries, {}, nullptr);
    } else {
      const at::Tensor kk = k.repeat_interleave(kH / kKv, 0), vv = v.repeat_interleave(kH / kKv, 0);
      const at::Tensor rel = pos.unsqueeze(1) - pos.unsqueeze(0);  // query - key
      const at::Tensor hidden = (rel < 0).logical_or(rel >= 3);
      const at::Tensor scores = at::matmul(q, kk.transpose(1, 2)) / std::sqrt(static_cast<double>(kD));
      out = at::matmul(at::softmax(scores.masked_fill(hidden, -INFINITY), -1), vv);
    }
    (out * weights).sum().backward();
    grads[run] = {q.grad(), k.grad(), v.grad()};
  }
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(grads[0][i].defined()) << "the routine cut the gradient of input " << i;
    EXPECT_TRUE(at::allclose(grads[0][i], grads[1][i], 1e-10, 1e-10)) << "input " << i;
  }
}

// The low-rank layout reads keys rebuilt in blocks of 1024 tokens and weighs values in its latent space:
// a prefill over three blocks (and decoding after it) equals attention over the rebuilt entries.
TEST(BlockedAttentionLayouts, LowRankOverSeveralKeyBlocksMatchesBruteForce) {
  at::manual_seed(5);
  constexpr int64_t H = 2, KV = 1, d = 4, S = 2200;
  ModelConfig config;
  config.num_heads = H;
  config.num_kv_heads = KV;
  config.head_dim = d;
  config.hidden_size = H * d;
  config.max_position_embeddings = S + 8;
  auto rope = std::make_shared<const Rope>(config, at::kCPU);
  auto projection = [](int64_t rank) {
    auto p = std::make_shared<lowrank::RankedProjection>();
    p->U = at::eye(KV * d, kF64) + 0.3 * at::randn({KV * d, KV * d}, kF64);
    p->U_inv = at::linalg_inv(p->U);
    p->fixed_rank = rank;
    return p;
  };
  lowrank::LowRankLayerCache cache({H, KV, d, 0}, rope, kF64, projection(3), projection(2));
  const at::Tensor pos = at::arange(S, at::kLong);
  cache.append(at::randn({KV, S, d}, kF64), at::randn({KV, S, d}, kF64), pos);
  const auto rebuilt = [&] {
    return std::make_pair(rope->apply(cache.reconstructed_keys(), cache.positions()), cache.reconstructed_values());
  };
  const at::Tensor q = at::randn({H, S, d}, kF64);
  const auto [keys, values] = rebuilt();
  EXPECT_TRUE(at::allclose(cache.attend(q, pos, {}, nullptr),
                           brute_force_attention(q, pos, keys, values, pos.unsqueeze(0), 0), 1e-10, 1e-10));

  const at::Tensor next = at::tensor(std::vector<int64_t>{S}, at::kLong);
  cache.append(at::randn({KV, 1, d}, kF64), at::randn({KV, 1, d}, kF64), next);
  const at::Tensor one = at::randn({H, 1, d}, kF64);
  const auto [keys2, values2] = rebuilt();
  EXPECT_TRUE(at::allclose(cache.attend(one, next, {}, nullptr),
                           brute_force_attention(one, next, keys2, values2, cache.positions().unsqueeze(0), 0), 1e-10,
                           1e-10));
}

}  // namespace
}  // namespace kvc
