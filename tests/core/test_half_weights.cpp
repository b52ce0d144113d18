// 16-bit weights on CPU: the widening is exact, and the matrix-vector and GEMM kernels that read bf16
// or f16 weights agree with a float64 product over the same (widened) values.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "kernels/cpu_features.h"
#include "kernels/half_precision.h"
#include "kernels/matvec.h"
#include "kernels/parallel_linear.h"

namespace kvc {
namespace {

// Every weight type on every instruction-set path (capped from the best this CPU has).
class HalfWeights : public ::testing::TestWithParam<std::tuple<at::ScalarType, HalfPrecisionIsa>> {
 protected:
  void SetUp() override {
    if (!cpu_has_avx2_fma()) GTEST_SKIP() << "CPU without AVX2/FMA: the kernels are not used";
    at::manual_seed(11);
    at::set_num_threads(2);
    limit_half_precision_isa(std::get<1>(GetParam()));
  }
  void TearDown() override { limit_half_precision_isa(HalfPrecisionIsa::Best); }
  at::ScalarType type() const { return std::get<0>(GetParam()); }
};

TEST_P(HalfWeights, WideningIsExactIncludingSpecialValues) {
  // Every 16-bit pattern: normals, subnormals, infinities, NaNs, both zeros.
  const at::Tensor bits = at::arange(0, 65536, at::kInt).to(at::kShort);
  const at::Tensor half = bits.view(type());
  at::Tensor widened = at::empty({65536}, at::kFloat);
  half_to_float(type(), half.data_ptr(), widened.data_ptr<float>(), 65536);
  const at::Tensor expected = half.to(at::kFloat);
  const at::Tensor both_nan = widened.isnan().logical_and(expected.isnan());
  EXPECT_TRUE(widened.eq(expected).logical_or(both_nan).all().item<bool>());
  // A length that is not a multiple of the vector width takes the scalar tail.
  at::Tensor tail = at::empty({13}, at::kFloat);
  half_to_float(type(), half.data_ptr(), tail.data_ptr<float>(), 13);
  EXPECT_TRUE(tail.equal(expected.narrow(0, 0, 13)));
}

// Narrowing rounds as LibTorch's conversion: ties to even, overflow to infinity, subnormals, NaN.
TEST_P(HalfWeights, NarrowingRoundsAsLibTorch) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  at::Tensor x = at::cat({at::randn({4000}) * 3, at::randn({1000}) * 1e-6, at::randn({1000}) * 1e5,
                          at::tensor({0.0f, -0.0f, inf, -inf, nan, 65504.0f, 65520.0f, 70000.0f, 6e-8f, 3e-8f, 1e-45f,
                                      1.0f + 1.0f / 2048, 1.0f + 3.0f / 2048, 1.0f + 1.0f / 256, 1.0f + 3.0f / 256})});
  // Floats of any sign and exponent exactly halfway between two bf16 values (f16's ties: the 1 + k/2048
  // above).
  const at::Tensor halfway = (at::randint(-32768, 32768, {2000}, at::kInt) * 65536 + 32768).view(at::kFloat);
  x = at::cat({x, halfway.masked_fill(halfway.isnan(), 1.0f)});
  for (const int64_t n : {x.numel(), int64_t{13}}) {
    at::Tensor narrowed = at::empty({n}, type());
    float_to_half(type(), x.data_ptr<float>(), narrowed.data_ptr(), n);
    const at::Tensor expected = x.narrow(0, 0, n).to(type());
    // NaN stays NaN (LibTorch's vector and scalar conversions give it different payloads); the rest bit
    // for bit.
    const at::Tensor nan_in = expected.isnan();
    EXPECT_TRUE(narrowed.isnan().equal(nan_in));
    const at::Tensor differ =
        (narrowed.view(at::kShort) != expected.view(at::kShort)).logical_and(nan_in.logical_not());
    EXPECT_EQ(differ.sum().item<int64_t>(), 0) << "first at " << x.narrow(0, 0, n).masked_select(differ);
  }
}

TEST_P(HalfWeights, MatvecMatchesFloat64Product) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {64, 64}, {130, 771}, {2304, 768}, {5, 4099}}) {
    const at::Tensor w = at::randn({rows, cols}).to(type()), x = at::randn({cols}), b = at::randn({rows});
    const at::Tensor y = fast_matvec(w, x, b);
    ASSERT_TRUE(y.defined()) << rows << "x" << cols;
    const at::Tensor expected = at::addmv(b.to(at::kDouble), w.to(at::kDouble), x.to(at::kDouble));
    EXPECT_LT((y.to(at::kDouble) - expected).abs().max().item<double>(), 4e-5 * std::sqrt(double(cols)))
        << rows << "x" << cols;
  }
}

TEST_P(HalfWeights, MatvecIsIndependentOfThreadCount) {
  const at::Tensor w = at::randn({4096, 512}).to(type()), x = at::randn({512});
  const at::Tensor two = fast_matvec(w, x, {});
  at::set_num_threads(1);
  EXPECT_TRUE(fast_matvec(w, x, {}).equal(two));
}

// Few rows split the output columns; many rows share widened blocks; odd sizes leave partial blocks.
TEST_P(HalfWeights, LinearMatchesFloat64ProductOnBothSplits) {
  for (int threads : {1, 2}) {
    at::set_num_threads(threads);
    for (auto [T, out, in] : {std::tuple<int64_t, int64_t, int64_t>{2, 2304, 768},
                              {5, 1100, 65},
                              {200, 2304, 768},
                              {300, 4100, 500},
                              {130, 70, 3000}}) {
      const at::Tensor w = at::randn({out, in}).to(type()), x = at::randn({T, in}), b = at::randn({out});
      const at::Tensor y = parallel_linear(x, w, b);
      ASSERT_TRUE(y.defined());
      const at::Tensor expected = at::addmm(b.to(at::kDouble), x.to(at::kDouble), w.to(at::kDouble).t());
      EXPECT_LT((y.to(at::kDouble) - expected).abs().max().item<double>(), 4e-5 * std::sqrt(double(in)))
          << threads << " threads, " << T << "x" << in << " by " << out;
    }
  }
}

TEST_P(HalfWeights, KernelsDeclineWhatTheyCannotDo) {
  const at::Tensor w = at::randn({8, 4}).to(type());
  EXPECT_FALSE(fast_matvec(w.t(), at::randn({8}), {}).defined());                // not contiguous
  EXPECT_FALSE(fast_matvec(w, at::randn({4}).to(type()), {}).defined());         // 16-bit activations
  EXPECT_FALSE(parallel_linear(at::randn({3, 8}), w.t(), {}).defined());         // not contiguous
  EXPECT_FALSE(parallel_linear(at::randn({3, 4}).to(type()), w, {}).defined());  // 16-bit activations
}

std::string case_name(const std::tuple<at::ScalarType, HalfPrecisionIsa>& param) {
  const HalfPrecisionIsa isa = std::get<1>(param);
  return std::string(std::get<0>(param) == at::kHalf ? "f16_" : "bf16_") + (isa == HalfPrecisionIsa::Best ? "best"
                                                                            : isa == HalfPrecisionIsa::Avx2
                                                                                ? "avx2"
                                                                                : "portable");
}

INSTANTIATE_TEST_SUITE_P(TypesAndPaths, HalfWeights,
                         ::testing::Combine(::testing::Values(at::kBFloat16, at::kHalf),
                                            ::testing::Values(HalfPrecisionIsa::Best, HalfPrecisionIsa::Avx2,
                                                              HalfPrecisionIsa::Portable)),
                         [](const auto& info) { return case_name(info.param); });

}  // namespace
}  // namespace kvc
