// The block kernels (matrix-vector products straight from ggml blocks) against dequantize-then-float64:
// on random blocks, on gguf.quants' golden blocks and on the real models' blocks, at every instruction
// set level this CPU has.
//
// Tolerances. The integer kernels multiply the weights with the input rounded to int8 blocks
// (quantized_activation.h), so they are checked twice:
//  - against the float64 product of the dequantized weights with that rounded input: only fp32
//    rounding differs, |error| <= 1e-5 * sum |w| |x|;
//  - against the float64 product with the input itself: the rounding moves each value by at most half
//    its block's scale d, so |error| <= sum_j |w_j| d_j / 2, plus the same fp32 allowance.
// The kernels that dequantize in registers take the fp32 input: the first bound against the input itself.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/util/Half.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_dequant.h"
#include "io/gguf_reader.h"
#include "kernels/block_dot.h"
#include "kernels/block_isa.h"
#include "kernels/block_linear.h"
#include "kernels/block_matvec.h"
#include "kernels/quantized_activation.h"
#include "support/paths.h"

namespace {

using kvc::BlockIsa;
using kvc::BlockType;

constexpr BlockType kQuantized[] = {BlockType::Q4_0, BlockType::Q4_1, BlockType::Q5_0, BlockType::Q5_1,
                                    BlockType::Q8_0, BlockType::Q4_K, BlockType::Q5_K, BlockType::Q6_K};

std::vector<BlockIsa> levels() {
  std::vector<BlockIsa> out;
  for (int l = 0; l <= static_cast<int>(kvc::best_block_isa()); ++l) out.push_back(static_cast<BlockIsa>(l));
  return out;
}

// Restores the best level and the integer kernels when a test ends.
class BlockKernels : public ::testing::Test {
 protected:
  void SetUp() override { at::set_num_threads(2); }
  void TearDown() override {
    kvc::limit_block_isa(BlockIsa::Avx512Vnni);
    for (BlockType t : kQuantized) kvc::set_block_kernel_form(t, kvc::BlockKernelForm::Integer);
  }
};

const kvc::BlockFormat& format(BlockType t) { return kvc::block_format(t); }

// Byte offsets of a block's half-precision scale fields: random bytes there could be NaN or infinity.
std::vector<int> half_fields(BlockType t) {
  switch (t) {
    case BlockType::Q4_1:
    case BlockType::Q5_1:
    case BlockType::Q4_K:
    case BlockType::Q5_K: return {0, 2};
    case BlockType::Q6_K: return {208};
    default: return {0};
  }
}

std::vector<uint8_t> random_blocks(BlockType t, int64_t rows, int64_t cols, std::mt19937& rng) {
  const kvc::BlockFormat& f = format(t);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows * kvc::block_row_bytes(f, cols)));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
  for (size_t block = 0; block < bytes.size(); block += static_cast<size_t>(f.bytes)) {
    for (int offset : half_fields(t)) {
      const uint16_t h = c10::Half(scale(rng)).x;
      std::memcpy(&bytes[block + static_cast<size_t>(offset)], &h, sizeof h);
    }
  }
  return bytes;
}

std::vector<float> dequantized(BlockType t, const uint8_t* data, int64_t rows, int64_t cols) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  kvc::gguf::dequantize(static_cast<uint32_t>(t), data, static_cast<uint64_t>(rows * cols), w.data());
  return w;
}

// The input as the integer kernels of `t` see it, and each value's rounding bound (d / 2).
struct RoundedInput {
  std::vector<double> value, half_step;
};
RoundedInput rounded(int64_t block, const std::vector<float>& x) {
  const int64_t cols = static_cast<int64_t>(x.size());
  kvc::Q8Rows q;
  q.quantize(x.data(), 1, cols, block);
  const kvc::Q8Row row = q.row(0);
  RoundedInput r;
  for (int64_t j = 0; j < cols; ++j) {
    r.value.push_back(static_cast<double>(row.q[j]) * row.d[j / block]);
    r.half_step.push_back(row.d[j / block] / 2.0);
  }
  return r;
}

// The activation blocks of the matrix-vector kernels: 256 values for the K formats, else 32.
int64_t matvec_block(BlockType t) { return kvc::is_k_format(t) ? 256 : 32; }

// Checks y (the kernel's output for weights w [rows, cols] and input x) against both bounds; `block`:
// the size of the activation blocks the kernel rounded the input in (0: it took the input as it is).
void expect_within_bounds(int64_t block, const std::vector<float>& w, const std::vector<float>& x, const float* y,
                          int64_t rows, const std::string& what) {
  const int64_t cols = static_cast<int64_t>(x.size());
  const bool integer = block > 0;
  const RoundedInput xr = rounded(integer ? block : 32, x);
  for (int64_t r = 0; r < rows; ++r) {
    double exact = 0, with_rounded = 0, magnitude = 0, rounding = 0;
    for (int64_t j = 0; j < cols; ++j) {
      const double wj = w[static_cast<size_t>(r * cols + j)];
      exact += wj * x[static_cast<size_t>(j)];
      with_rounded += wj * xr.value[static_cast<size_t>(j)];
      magnitude += std::fabs(wj) * std::fabs(x[static_cast<size_t>(j)]);
      rounding += std::fabs(wj) * xr.half_step[static_cast<size_t>(j)];
    }
    const double fp32 = 1e-5 * magnitude + 1e-30;
    if (integer) {
      ASSERT_LE(std::fabs(y[r] - with_rounded), fp32) << what << " row " << r << " (against the rounded input)";
      ASSERT_LE(std::fabs(y[r] - exact), rounding * (1 + 1e-6) + fp32) << what << " row " << r;
    } else {
      ASSERT_LE(std::fabs(y[r] - exact), fp32) << what << " row " << r;
    }
  }
}

std::vector<float> random_input(int64_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(n));
  for (auto& v : x) v = normal(rng);
  return x;
}

at::Tensor as_tensor(const std::vector<float>& x) {
  return at::from_blob(const_cast<float*>(x.data()), {static_cast<int64_t>(x.size())}, at::kFloat).clone();
}

std::vector<std::pair<int64_t, int64_t>> shapes(BlockType t) {
  // Odd row counts, one block per row, rows longer than a thread's chunk.
  if (kvc::is_k_format(t)) return {{1, 256}, {3, 512}, {17, 768}, {130, 2048}, {5, 4096}};
  return {{1, 32}, {3, 96}, {17, 640}, {130, 2048}, {5, 4096}, {301, 576}};
}

TEST_F(BlockKernels, RandomBlocksMatchDequantizedProductsAtEveryLevel) {
  std::mt19937 rng(11);
  for (BlockType t : kQuantized) {
    for (auto [rows, cols] : shapes(t)) {
      const std::vector<uint8_t> blocks = random_blocks(t, rows, cols, rng);
      const std::vector<float> w = dequantized(t, blocks.data(), rows, cols), x = random_input(cols, rng);
      kvc::BlockMatrix m(cols, nullptr);
      m.append(t, blocks.data(), rows);
      for (BlockIsa isa : levels()) {
        kvc::limit_block_isa(isa);
        const at::Tensor y = kvc::block_matvec(m, as_tensor(x));
        ASSERT_EQ(y.size(0), rows);
        expect_within_bounds(matvec_block(t), w, x, y.data_ptr<float>(), rows,
                             fmt::format("{} {}x{} {}", format(t).name, rows, cols, kvc::block_isa_name(isa)));
      }
    }
  }
}

TEST_F(BlockKernels, RegisterDequantizationMatchesTheFloatProduct) {
  if (kvc::best_block_isa() != BlockIsa::Avx512Vnni) GTEST_SKIP() << "the float form runs on AVX-512 only";
  std::mt19937 rng(12);
  for (BlockType t : kQuantized) {
    kvc::set_block_kernel_form(t, kvc::BlockKernelForm::Float);
    for (auto [rows, cols] : shapes(t)) {
      const std::vector<uint8_t> blocks = random_blocks(t, rows, cols, rng);
      const std::vector<float> w = dequantized(t, blocks.data(), rows, cols), x = random_input(cols, rng);
      kvc::BlockMatrix m(cols, nullptr);
      m.append(t, blocks.data(), rows);
      const at::Tensor y = kvc::block_matvec(m, as_tensor(x));
      expect_within_bounds(0, w, x, y.data_ptr<float>(), rows,
                           fmt::format("{} {}x{} float form", format(t).name, rows, cols));
    }
  }
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// gguf.quants' blocks and its own dequantization of them (scripts/make_gguf_dequant_goldens.py), as rows
// of 256 values: the expectation does not come from kvc's dequantizer at all.
TEST_F(BlockKernels, GoldenBlocksMatchGgufQuantsDequantization) {
  std::mt19937 rng(13);
  for (BlockType t : kQuantized) {
    const std::string base = kvc::test::repo_data_dir() + "/gguf/dequant/" + format(t).name;
    const std::vector<uint8_t> blocks = read_bytes(base + ".blocks"), values = read_bytes(base + ".f32");
    ASSERT_FALSE(values.empty()) << base;
    std::vector<float> w(values.size() / sizeof(float));
    std::memcpy(w.data(), values.data(), values.size());
    const int64_t cols = 256, rows = static_cast<int64_t>(w.size()) / cols;
    ASSERT_EQ(static_cast<int64_t>(blocks.size()), rows * kvc::block_row_bytes(format(t), cols));
    const std::vector<float> x = random_input(cols, rng);
    kvc::BlockMatrix m(cols, nullptr);
    m.append(t, blocks.data(), rows);
    for (BlockIsa isa : levels()) {
      kvc::limit_block_isa(isa);
      const at::Tensor y = kvc::block_matvec(m, as_tensor(x));
      expect_within_bounds(matvec_block(t), w, x, y.data_ptr<float>(), rows,
                           fmt::format("golden {} {}", format(t).name, kvc::block_isa_name(isa)));
    }
  }
}

// Up to 512 rows of each quantized type a real model file holds.
void check_real_model(const std::string& path) {
  if (!std::ifstream(path)) GTEST_SKIP() << path << " is not installed (scripts/setup.sh)";
  const auto file = kvc::gguf::GgufFile::open(path);
  std::mt19937 rng(14);
  std::vector<uint32_t> seen;
  for (const kvc::gguf::TensorInfo& info : file->tensors()) {
    const kvc::BlockFormat* f = kvc::block_format(info.type);
    if (f == nullptr || f->values == 1 || info.shape.size() != 2 ||
        std::find(seen.begin(), seen.end(), info.type) != seen.end()) {
      continue;
    }
    seen.push_back(info.type);
    const auto cols = static_cast<int64_t>(info.shape[0]);
    const int64_t rows = std::min<int64_t>(512, static_cast<int64_t>(info.shape[1]));
    const std::vector<float> w = dequantized(f->type, info.data, rows, cols), x = random_input(cols, rng);
    kvc::BlockMatrix m(cols, file);
    m.append(f->type, info.data, rows);
    for (BlockIsa isa : levels()) {
      kvc::limit_block_isa(isa);
      const at::Tensor y = kvc::block_matvec(m, as_tensor(x));
      expect_within_bounds(matvec_block(f->type), w, x, y.data_ptr<float>(), rows,
                           fmt::format("{} ({}) {}", info.name, f->name, kvc::block_isa_name(isa)));
    }
  }
  std::printf("%s: %zu block types checked\n", path.c_str(), seen.size());
  EXPECT_FALSE(seen.empty());
}

TEST_F(BlockKernels, Gemma3BlocksMatchDequantizedProducts) { check_real_model(kvc::test::gemma3_gguf()); }
TEST_F(BlockKernels, SmolLM2BlocksMatchDequantizedProducts) { check_real_model(kvc::test::smollm2_gguf()); }

// Segments of different formats stacked (as q, k, v of a Q4_K_M layer), one of them with its rows
// reordered, and 16/32-bit segments among them.
TEST_F(BlockKernels, StackedSegmentsOfMixedFormatsInOutputOrder) {
  std::mt19937 rng(15);
  const int64_t cols = 512;
  const std::vector<uint8_t> a = random_blocks(BlockType::Q4_K, 6, cols, rng),
                             b = random_blocks(BlockType::Q6_K, 3, cols, rng),
                             c = random_blocks(BlockType::Q8_0, 4, cols, rng);
  const at::Tensor half = at::randn({2, cols}).to(at::kHalf), single = at::randn({1, cols});
  const std::vector<int32_t> order = {3, 0, 5, 1, 4, 2};
  kvc::BlockMatrix m(cols, nullptr);
  m.append(BlockType::Q4_K, a.data(), 6, order);
  m.append(BlockType::Q6_K, b.data(), 3);
  m.append(BlockType::F16, static_cast<const uint8_t*>(half.data_ptr()), 2);
  m.append(BlockType::Q8_0, c.data(), 4);
  m.append(BlockType::F32, static_cast<const uint8_t*>(single.data_ptr()), 1);
  ASSERT_EQ(m.rows(), 16);
  ASSERT_EQ(m.bytes(), 6 * 288 + 3 * 420 + 2 * 1024 + 4 * 544 + 2048);
  const std::vector<float> x = random_input(cols, rng);
  for (BlockIsa isa : levels()) {
    kvc::limit_block_isa(isa);
    const at::Tensor y = kvc::block_matvec(m, as_tensor(x), at::arange(16, at::kFloat));
    const float* yp = y.data_ptr<float>();
    const auto one = [&](BlockType t, const std::vector<uint8_t>& blocks, int64_t rows, int64_t first,
                         const std::vector<int32_t>& map) {
      const std::vector<float> w = dequantized(t, blocks.data(), rows, cols);
      std::vector<float> got(static_cast<size_t>(rows));
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t out = first + (map.empty() ? r : map[static_cast<size_t>(r)]);
        got[static_cast<size_t>(r)] = yp[out] - static_cast<float>(out);  // minus the bias
      }
      expect_within_bounds(matvec_block(t), w, x, got.data(), rows,
                           fmt::format("stacked {} {}", format(t).name, kvc::block_isa_name(isa)));
    };
    one(BlockType::Q4_K, a, 6, 0, order);
    one(BlockType::Q6_K, b, 3, 6, {});
    one(BlockType::Q8_0, c, 4, 11, {});
    const at::Tensor xt = as_tensor(x);
    const at::Tensor dense = at::mv(half.to(at::kFloat), xt);
    EXPECT_TRUE(at::allclose(y.narrow(0, 9, 2) - at::arange(9, 11, at::kFloat), dense, 1e-4, 1e-4));
    EXPECT_NEAR(yp[15] - 15.0f, at::dot(single[0], xt).item<float>(), 1e-4);
  }
}

// Prefill: every token's row of the product, against the same bounds.
TEST_F(BlockKernels, MatrixProductsMatchDequantizedProductsAtEveryLevel) {
  std::mt19937 rng(18);
  for (BlockType t : kQuantized) {
    for (auto [rows, cols] : shapes(t)) {
      if (rows * cols > 200000) continue;  // the float64 reference of every token: the smaller shapes
      const std::vector<uint8_t> blocks = random_blocks(t, rows, cols, rng);
      const std::vector<float> w = dequantized(t, blocks.data(), rows, cols);
      kvc::BlockMatrix m(cols, nullptr);
      m.append(t, blocks.data(), rows);
      for (int64_t tokens : {1, 5, 16, 37}) {
        const at::Tensor x = at::randn({tokens, cols});
        for (BlockIsa isa : levels()) {
          kvc::limit_block_isa(isa);
          const at::Tensor y = kvc::block_linear(m, x, at::arange(rows, at::kFloat));
          ASSERT_EQ(y.size(0), tokens);
          ASSERT_EQ(y.size(1), rows);
          // A few tokens: the matrix-vector kernels; more: AVX-512's panels (32-value input blocks), else
          // dequantized panels and an fp32 GEMM (the input as it is).
          const int64_t block = tokens < 4 ? matvec_block(t) : isa == BlockIsa::Avx512Vnni ? 32 : 0;
          for (int64_t i = 0; i < tokens; ++i) {
            const std::vector<float> xi(x[i].data_ptr<float>(), x[i].data_ptr<float>() + cols);
            const at::Tensor yi = (y[i] - at::arange(rows, at::kFloat)).contiguous();
            expect_within_bounds(block, w, xi, yi.data_ptr<float>(), rows,
                                 fmt::format("{} {}x{} token {} of {} {}", format(t).name, rows, cols, i, tokens,
                                             kvc::block_isa_name(isa)));
          }
        }
      }
    }
  }
}

// Segments of mixed formats, reordered, through the prefill product, against the dequantized matrix in
// output order.
TEST_F(BlockKernels, MatrixProductsOfStackedSegmentsInOutputOrder) {
  if (kvc::best_block_isa() != BlockIsa::Avx512Vnni) GTEST_SKIP() << "the panel products run on AVX-512 only";
  std::mt19937 rng(19);
  const int64_t cols = 512;
  const std::vector<uint8_t> a = random_blocks(BlockType::Q5_K, 7, cols, rng),
                             b = random_blocks(BlockType::Q6_K, 5, cols, rng);
  const at::Tensor single = at::randn({3, cols});
  const std::vector<int32_t> order_a = {6, 2, 0, 4, 1, 3, 5}, order_b = {4, 3, 2, 1, 0};
  kvc::BlockMatrix m(cols, nullptr);
  m.append(BlockType::Q5_K, a.data(), 7, order_a);
  m.append(BlockType::F32, static_cast<const uint8_t*>(single.data_ptr()), 3);
  m.append(BlockType::Q6_K, b.data(), 5, order_b);
  // Each quantized segment dequantized in its output order.
  const auto in_output_order = [&](BlockType t, const std::vector<uint8_t>& blocks, const std::vector<int32_t>& order) {
    const int64_t rows = static_cast<int64_t>(order.size());
    const std::vector<float> stored = dequantized(t, blocks.data(), rows, cols);
    std::vector<float> out(stored.size());
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(&stored[static_cast<size_t>(r * cols)], cols, &out[static_cast<size_t>(order[r] * cols)]);
    return out;
  };
  const std::vector<float> wa = in_output_order(BlockType::Q5_K, a, order_a),
                           wb = in_output_order(BlockType::Q6_K, b, order_b);
  const at::Tensor x = at::randn({21, cols});
  const at::Tensor y = kvc::block_linear(m, x);
  for (int64_t i = 0; i < 21; ++i) {
    const std::vector<float> xi(x[i].data_ptr<float>(), x[i].data_ptr<float>() + cols);
    const at::Tensor ya = y[i].narrow(0, 0, 7).contiguous(), yb = y[i].narrow(0, 10, 5).contiguous();
    expect_within_bounds(32, wa, xi, ya.data_ptr<float>(), 7, fmt::format("stacked Q5_K, token {}", i));
    expect_within_bounds(32, wb, xi, yb.data_ptr<float>(), 5, fmt::format("stacked Q6_K, token {}", i));
  }
  EXPECT_TRUE(at::allclose(y.narrow(1, 7, 3), at::mm(x, single.t()), 1e-4, 1e-4));
}

// Many tokens on the levels without panel products: blocks of rows dequantized once and shared by the
// threads, more rows than one block holds, segments of mixed formats, one reordered; against the float64
// product of the dequantized matrix in output order (the input as it is, fp32 rounding only).
TEST_F(BlockKernels, ManyTokensShareDequantizedBlocks) {
  std::mt19937 rng(21);
  const int64_t cols = 512, tokens = 131;
  const int64_t rows_a = 6150, rows_b = 70, rows_c = 9;  // a block is 6144 rows of 512 values
  const std::vector<uint8_t> a = random_blocks(BlockType::Q4_1, rows_a, cols, rng),
                             b = random_blocks(BlockType::Q6_K, rows_b, cols, rng),
                             c = random_blocks(BlockType::Q8_0, rows_c, cols, rng);
  std::vector<int32_t> order(static_cast<size_t>(rows_b));
  for (int32_t i = 0; i < rows_b; ++i) order[static_cast<size_t>(i)] = (i * 17) % rows_b;  // 17 and 70 coprime
  kvc::BlockMatrix m(cols, nullptr);
  m.append(BlockType::Q4_1, a.data(), rows_a);
  m.append(BlockType::Q6_K, b.data(), rows_b, order);
  m.append(BlockType::Q8_0, c.data(), rows_c);
  std::vector<float> w = dequantized(BlockType::Q4_1, a.data(), rows_a, cols);
  const std::vector<float> wb = dequantized(BlockType::Q6_K, b.data(), rows_b, cols),
                           wc = dequantized(BlockType::Q8_0, c.data(), rows_c, cols);
  w.resize(static_cast<size_t>((rows_a + rows_b + rows_c) * cols));
  for (int64_t r = 0; r < rows_b; ++r) {
    std::copy_n(&wb[static_cast<size_t>(r * cols)], cols,
                &w[static_cast<size_t>((rows_a + order[static_cast<size_t>(r)]) * cols)]);
  }
  std::copy(wc.begin(), wc.end(), w.begin() + (rows_a + rows_b) * cols);
  const at::Tensor wt = at::from_blob(w.data(), {m.rows(), cols}, at::kFloat).to(at::kDouble);
  const at::Tensor x = at::randn({tokens, cols});
  const at::Tensor expected = at::mm(x.to(at::kDouble), wt.t()),
                   magnitude = at::mm(x.abs().to(at::kDouble), wt.abs().t());
  for (BlockIsa isa : levels()) {
    if (isa == BlockIsa::Avx512Vnni) continue;  // the panel products, with their own test
    kvc::limit_block_isa(isa);
    const at::Tensor y = kvc::block_linear(m, x);
    const at::Tensor excess = (y.to(at::kDouble) - expected).abs() - (1e-5 * magnitude + 1e-30);
    EXPECT_LE(excess.max().item<double>(), 0.0) << kvc::block_isa_name(isa);
  }
}

TEST_F(BlockKernels, ResultsDoNotDependOnTheThreadCount) {
  std::mt19937 rng(16);
  for (BlockType t : kQuantized) {
    const int64_t rows = 3001, cols = 1024;
    const std::vector<uint8_t> blocks = random_blocks(t, rows, cols, rng);
    kvc::BlockMatrix m(cols, nullptr);
    m.append(t, blocks.data(), rows);
    const at::Tensor x = as_tensor(random_input(cols, rng));
    const at::Tensor xs = at::randn({40, cols});
    at::set_num_threads(2);
    const at::Tensor two = kvc::block_matvec(m, x), two_linear = kvc::block_linear(m, xs);
    at::set_num_threads(1);
    EXPECT_TRUE(kvc::block_matvec(m, x).equal(two)) << format(t).name;
    EXPECT_TRUE(kvc::block_linear(m, xs).equal(two_linear)) << format(t).name;
    at::set_num_threads(2);
  }
}

// Several inputs at once (a lockstep decode step) give each input's own product, bit for bit: the same
// quantized input and row kernels, on a stacked matrix with rows in output order and on one long enough to be
// split over the threads, at every level and in both kernel forms.
TEST_F(BlockKernels, ManyInputsEachGetTheirOwnProductBitForBit) {
  std::mt19937 rng(21);
  const int64_t cols = 512;
  const std::vector<uint8_t> a = random_blocks(BlockType::Q4_K, 6, cols, rng),
                             b = random_blocks(BlockType::Q4_1, 3001, cols, rng),
                             c = random_blocks(BlockType::Q8_0, 4, cols, rng);
  const at::Tensor half = at::randn({2, cols}).to(at::kHalf);
  kvc::BlockMatrix m(cols, nullptr);
  m.append(BlockType::Q4_K, a.data(), 6, {3, 0, 5, 1, 4, 2});
  m.append(BlockType::Q4_1, b.data(), 3001);
  m.append(BlockType::F16, static_cast<const uint8_t*>(half.data_ptr()), 2);
  m.append(BlockType::Q8_0, c.data(), 4);
  const at::Tensor bias = at::randn({m.rows()});
  for (int64_t inputs : {1, 2, 5}) {
    const at::Tensor xs = at::randn({inputs, cols});
    for (BlockIsa isa : levels()) {
      kvc::limit_block_isa(isa);
      for (kvc::BlockKernelForm form : {kvc::BlockKernelForm::Integer, kvc::BlockKernelForm::Float}) {
        for (BlockType t : kQuantized) kvc::set_block_kernel_form(t, form);
        const at::Tensor each = kvc::block_matvec_each(m, xs, bias);
        ASSERT_EQ(each.sizes(), (std::vector<int64_t>{inputs, m.rows()}));
        for (int64_t i = 0; i < inputs; ++i) {
          EXPECT_TRUE(each[i].equal(kvc::block_matvec(m, xs[i], bias)))
              << inputs << " inputs, input " << i << ", " << kvc::block_isa_name(isa);
        }
      }
    }
  }
  EXPECT_THROW(kvc::block_matvec_each(m, at::randn({2, cols + 1})), std::exception);
}

// The other levels' prefill panels: the kernels' own dequantization against gguf_dequant.cpp's.
TEST_F(BlockKernels, PanelDequantizationMatchesTheReferenceDecoder) {
  std::mt19937 rng(20);
  for (BlockType t : kQuantized) {
    const int64_t rows = 7, cols = 512;
    const std::vector<uint8_t> blocks = random_blocks(t, rows, cols, rng);
    const std::vector<float> expected = dequantized(t, blocks.data(), rows, cols);
    std::vector<float> got(expected.size());
    kvc::dequantize_block_rows(t, blocks.data(), kvc::block_row_bytes(format(t), cols), cols, rows, got.data());
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_NEAR(got[i], expected[i], 1e-6f * (1 + std::fabs(expected[i]))) << format(t).name << " value " << i;
    }
  }
}

// The activation quantizer against its definition: d = max |x| / 127 per block, q the nearest integer
// to x / d, the sums of q; every level gives the same bytes.
TEST_F(BlockKernels, ActivationBlocksFollowTheirDefinition) {
  std::mt19937 rng(17);
  std::vector<float> x = random_input(1024, rng);
  for (int j = 256; j < 512; ++j) x[static_cast<size_t>(j)] = 0.0f;     // a block of zeros
  for (int j = 512; j < 768; ++j) x[static_cast<size_t>(j)] *= 1e-30f;  // tiny values
  for (int64_t block : {32, 256}) {
    std::vector<std::vector<int8_t>> per_level;
    for (BlockIsa isa : levels()) {
      kvc::limit_block_isa(isa);
      kvc::Q8Rows q;
      q.quantize(x.data(), 2, 512, block);
      std::vector<int8_t> bytes;
      for (int64_t r = 0; r < 2; ++r) {
        const kvc::Q8Row row = q.row(r);
        for (int64_t b = 0; b < 512 / block; ++b) {
          float amax = 0;
          int32_t sum = 0;
          for (int64_t j = 0; j < block; ++j)
            amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * 512 + b * block + j)]));
          ASSERT_FLOAT_EQ(row.d[b], amax / 127.0f);
          for (int64_t j = 0; j < block; ++j) {
            const float xj = x[static_cast<size_t>(r * 512 + b * block + j)];
            const int8_t qj = row.q[b * block + j];
            if (amax > 0) ASSERT_LE(std::fabs(qj - xj * 127.0f / amax), 0.5f + 1e-4f);
            else ASSERT_EQ(qj, 0);
            sum += qj;
            bytes.push_back(qj);
          }
          ASSERT_EQ(row.sum[b], sum);
          ASSERT_FLOAT_EQ(row.dsum[b], row.d[b] * static_cast<float>(sum));
          if (block == 256) {
            for (int g = 0; g < 16; ++g) {
              int32_t s16 = 0;
              for (int j = 0; j < 16; ++j) s16 += row.q[b * 256 + 16 * g + j];
              ASSERT_EQ(row.sum16[b * 16 + g], s16);
            }
            for (int g = 0; g < 8; ++g)
              ASSERT_EQ(row.sum32[b * 8 + g], row.sum16[b * 16 + 2 * g] + row.sum16[b * 16 + 2 * g + 1]);
          }
        }
      }
      per_level.push_back(bytes);
    }
    for (const auto& bytes : per_level) EXPECT_EQ(bytes, per_level.front()) << "block " << block;
  }
}

}  // namespace
