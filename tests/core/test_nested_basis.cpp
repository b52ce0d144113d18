// The pieces of MatryoshkaKV-style training (lowrank/nested_basis.h): the Cayley map against its closed
// form and the orthogonality it guarantees, and the rank schedule's draws.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>

#include "lowrank/nested_basis.h"

namespace kvc::lowrank {
namespace {

// raw = [[0, a], [0, 0]]: S = [[0, a], [-a, 0]], and (I + S)^{-1} (I - S) is the rotation by 2·atan(a).
TEST(NestedBasis, CayleyOfATwoByTwoIsTheRotationByTwiceTheArctangent) {
  for (double a : {-3.0, -0.4, 0.0, 0.25, 1.0, 7.5}) {
    const torch::Tensor raw = torch::tensor({0.0, a, 0.0, 0.0}, torch::kDouble).view({2, 2});
    const torch::Tensor q = cayley_rotation(raw);
    const double theta = 2 * std::atan(a);
    EXPECT_NEAR(q[0][0].item<double>(), std::cos(theta), 1e-12) << a;
    EXPECT_NEAR(q[0][1].item<double>(), -std::sin(theta), 1e-12) << a;
    EXPECT_NEAR(q[1][0].item<double>(), std::sin(theta), 1e-12) << a;
    EXPECT_NEAR(q[1][1].item<double>(), std::cos(theta), 1e-12) << a;
  }
}

TEST(NestedBasis, CayleyIsOrthogonalForAnyRawMatrixAndTheIdentityAtZero) {
  torch::manual_seed(3);
  for (int64_t d : {1, 5, 32}) {
    const torch::Tensor raw = torch::randn({d, d}, torch::kDouble).mul(2.0).requires_grad_(true);
    const torch::Tensor q = cayley_rotation(raw);
    EXPECT_LT((q.t().matmul(q) - torch::eye(d, torch::kDouble)).abs().max().item<double>(), 1e-12) << d;
    EXPECT_LT((cayley_rotation(torch::zeros({d, d}, torch::kDouble)) - torch::eye(d, torch::kDouble))
                  .abs()
                  .max()
                  .item<double>(),
              1e-15);
    // Gradients reach raw (what training moves); a 1x1 skew part is zero, so only d > 1 moves.
    q.narrow(1, 0, 1).sum().backward();
    ASSERT_TRUE(raw.grad().defined());
    EXPECT_TRUE(torch::isfinite(raw.grad()).all().item<bool>());
    if (d > 1) EXPECT_GT(raw.grad().abs().sum().item<double>(), 0.0);
  }
}

TEST(NestedBasis, RanksAreDrawnFromTheScheduleAndRepeatForTheSameWindow) {
  const std::vector<double> shares = {0.125, 0.5, 1.0};
  std::set<int64_t> seen;
  for (int64_t step = 0; step < 200; ++step) {
    const int64_t r = nested_rank(shares, 64, 7, step, 1, 3, 0);
    EXPECT_EQ(r, nested_rank(shares, 64, 7, step, 1, 3, 0));
    seen.insert(r);
  }
  EXPECT_EQ(seen, (std::set<int64_t>{8, 32, 64}));
  // Keys and values, layers and slots draw apart (not one rank for the whole model).
  int differ = 0;
  for (int64_t step = 0; step < 50; ++step)
    differ += nested_rank(shares, 64, 7, step, 0, 0, 0) != nested_rank(shares, 64, 7, step, 0, 0, 1);
  EXPECT_GT(differ, 10);
  EXPECT_EQ(rank_of_share(0.001, 64), 1);
  EXPECT_EQ(rank_of_share(0.5, 5), 3);  // round half away from zero
  EXPECT_EQ(rank_of_share(1.0, 5), 5);
}

}  // namespace
}  // namespace kvc::lowrank
