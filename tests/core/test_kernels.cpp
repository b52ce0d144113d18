// The hand-written CPU kernels against brute-force float64 computations of the same quantities.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "core/rope.h"
#include "kernels/block_isa.h"
#include "kernels/cpu_features.h"
#include "kernels/decode_attention.h"
#include "kernels/eviction_scan.h"
#include "kernels/gated_activation.h"
#include "kernels/matvec.h"
#include "kernels/per_head_products.h"
#include "kernels/prefill_attention.h"
#include "kernels/rms_norm.h"
#include "runtime/balanced_parallel_for.h"
#include "support/brute_force_attention.h"

namespace {

using kvc::test::brute_force_attention;

class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kvc::cpu_has_avx2_fma()) GTEST_SKIP() << "CPU without AVX2/FMA: the kernels are not used";
    at::manual_seed(7);
    at::set_num_threads(2);
  }
};

TEST_F(KernelTest, MatvecMatchesFloat64ProductForAnyShape) {
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {7, 13}, {64, 64}, {130, 771}, {2304, 768}, {5, 4099}}) {
    const at::Tensor w = at::randn({rows, cols}), x = at::randn({cols}), b = at::randn({rows});
    const at::Tensor y = kvc::fast_matvec(w, x, b);
    ASSERT_TRUE(y.defined());
    const at::Tensor expected = at::addmv(b.to(at::kDouble), w.to(at::kDouble), x.to(at::kDouble));
    // fp32 accumulation over `cols` terms: error grows like sqrt(cols) * eps * |terms|.
    EXPECT_LT((y.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5 * std::sqrt(double(cols)) * 4)
        << rows << "x" << cols;
    EXPECT_FALSE(kvc::fast_matvec(w, x, {}).equal(y)) << "bias must be added";
  }
}

TEST_F(KernelTest, MatvecIsIndependentOfThreadCount) {
  const at::Tensor w = at::randn({4096, 512}), x = at::randn({512});
  const at::Tensor two = kvc::fast_matvec(w, x, {});
  at::set_num_threads(1);
  EXPECT_TRUE(kvc::fast_matvec(w, x, {}).equal(two));
}

// Every item exactly once, in chunks no longer than asked (one call on one thread), for any thread
// count and any remainder.
TEST(BalancedParallelFor, CoversEveryItemOnceInChunks) {
  const int before = at::get_num_threads();
  for (const int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    for (const auto& [n, chunk] :
         std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {1, 4}, {5, 8}, {64, 1}, {97, 5}, {1000, 64}}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
      std::atomic<bool> too_long{false};
      kvc::balanced_parallel_for(n, chunk, [&](int64_t begin, int64_t end) {
        if ((threads > 1 && end - begin > chunk) || begin >= end) too_long = true;
        for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(i)];
      });
      EXPECT_FALSE(too_long) << n << " items, chunk " << chunk;
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "item " << i << " of " << n;
    }
  }
  at::set_num_threads(before);
}

// A thread held up at its first chunk does not hold up the loop: the other thread takes the rest of its
// share (a static split would leave all of it to the slow thread).
TEST(BalancedParallelFor, AnotherThreadTakesOverASlowThreadsShare) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  const int64_t n = 64;
  std::vector<int> ran_on(n, -1);
  std::atomic<bool> held{false};
  kvc::balanced_parallel_for(n, 1, [&](int64_t begin, int64_t) {
    const int thread = omp_get_thread_num();
    if (thread == 0 && !held.exchange(true)) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    ran_on[static_cast<size_t>(begin)] = thread;
  });
  at::set_num_threads(before);
  const auto first_half = std::vector<int>(ran_on.begin(), ran_on.begin() + n / 2);
  EXPECT_GT(std::count(first_half.begin(), first_half.end(), 1), 0) << "thread 1 never helped with thread 0's share";
  EXPECT_EQ(std::count(ran_on.begin(), ran_on.end(), -1), 0);
}

// `alongside` runs once, on the calling thread, while the other thread is already taking chunks: it
// sees a chunk done without waiting for it (run before the loop, it would wait in vain).
TEST(BalancedParallelFor, AlongsideOverlapsTheChunks) {
  const int before = at::get_num_threads();
  at::set_num_threads(2);
  std::atomic<int> done{0}, calls{0};
  bool saw_a_chunk = false, on_caller = false;
  const std::thread::id caller = std::this_thread::get_id();
  kvc::balanced_parallel_for(
      64, 1, [&](int64_t, int64_t) { ++done; },
      [&] {
        ++calls;
        on_caller = std::this_thread::get_id() == caller;
        for (int i = 0; i < 2000 && done.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        saw_a_chunk = done.load() > 0;
      });
  EXPECT_EQ(calls.load(), 1);
  EXPECT_TRUE(on_caller);
  EXPECT_TRUE(saw_a_chunk);
  EXPECT_EQ(done.load(), 64);
  // On one thread it runs first, once; an exception from it reaches the caller.
  at::set_num_threads(1);
  std::vector<int> order;
  kvc::balanced_parallel_for(
      4, 1, [&](int64_t, int64_t) { order.push_back(1); }, [&] { order.push_back(0); });
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  at::set_num_threads(2);
  EXPECT_THROW(kvc::balanced_parallel_for(
                   64, 1, [](int64_t, int64_t) {}, [] { throw std::runtime_error("side"); }),
               std::runtime_error);
  at::set_num_threads(before);
}

// The eviction scans against plain loops over the same rows, at lengths around the vector width,
// with ties and NaNs: first_argmin as at::argmin decides.
TEST_F(KernelTest, EvictionScansMatchPlainLoops) {
  for (int64_t n = 1; n <= 41; ++n) {
    for (int trial = 0; trial < 4; ++trial) {
      at::Tensor x = at::randint(0, 6, {n}, at::kDouble);  // few distinct values: many ties
      if (trial == 2 && n > 1) x[n / 2] = std::numeric_limits<double>::quiet_NaN();
      if (trial == 3) x[n - 1] = std::numeric_limits<double>::quiet_NaN();
      EXPECT_EQ(kvc::first_argmin(x.data_ptr<double>(), n), x.argmin().item<int64_t>())
          << "n " << n << " trial " << trial;

      const at::Tensor positions = at::randperm(3 * n, at::kLong).narrow(0, 0, n).contiguous();
      const int64_t* p = positions.data_ptr<int64_t>();
      const std::vector<int64_t> v(p, p + n);
      const kvc::PositionRange range = kvc::position_range(p, n);
      EXPECT_EQ(range.oldest, *std::min_element(v.begin(), v.end()));
      EXPECT_EQ(range.newest, *std::max_element(v.begin(), v.end()));
      const int64_t least = trial * n / 2, most = 3 * n - least;
      const kvc::PositionCounts counts = kvc::count_positions(p, n, least, most);
      EXPECT_EQ(counts.at_least, std::count_if(v.begin(), v.end(), [&](int64_t a) { return a >= least; }));
      EXPECT_EQ(counts.at_most, std::count_if(v.begin(), v.end(), [&](int64_t a) { return a <= most; }));

      const at::Tensor scores = at::rand({n}, at::kDouble);
      at::Tensor out = at::empty({n}, at::kDouble);
      const int64_t newest = 2 * n, oldest = n / 3;
      kvc::mark_protected(p, scores.data_ptr<double>(), out.data_ptr<double>(), n, newest, oldest, 1e12);
      for (int64_t i = 0; i < n; ++i) {
        const double expect = v[i] <= oldest   ? 2e12
                              : v[i] >= newest ? static_cast<double>(v[i]) + 1e12
                                               : scores[i].item<double>();
        ASSERT_EQ(out[i].item<double>(), expect) << "n " << n << " entry " << i;
      }
    }
  }
}

TEST_F(KernelTest, MatvecDeclinesWhatItCannotDo) {
  EXPECT_FALSE(kvc::fast_matvec(at::randn({4, 4}, at::kDouble), at::randn({4}, at::kDouble), {}).defined());
  EXPECT_FALSE(kvc::fast_matvec(at::randn({4, 8}).t(), at::randn({4}), {}).defined());  // not contiguous
}

// The low-rank decode step's per-head products against ATen's batched product in float64: each head's
// basis rows read where they lie in a larger per-head matrix (the leading rows of U^{-1} per head).
TEST_F(KernelTest, PerHeadProductsMatchBatchedProducts) {
  for (const at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    for (auto [B, R, k, n] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{12, 1, 192, 64},
                              {2, 3, 5, 13},
                              {1, 4, 1, 1},
                              {3, 2, 17, 256}}) {
      const at::Tensor whole = at::randn({B, k + 3, n}, at::kDouble);
      const at::Tensor m = whole.to(dtype).narrow(1, 0, k);
      const at::Tensor a = at::randn({B, R, n}, at::kDouble), z = at::randn({B, R, k}, at::kDouble);
      const double tol = dtype == at::kFloat ? 1e-4 * std::sqrt(double(std::max(k, n))) : 1e-12;
      const at::Tensor dots = kvc::per_head_dot_rows(a.to(dtype), m);
      ASSERT_TRUE(dots.defined());
      EXPECT_LT((dots.to(at::kDouble) - at::bmm(a, whole.narrow(1, 0, k).transpose(1, 2))).abs().max().item<double>(),
                tol)
          << c10::toString(dtype) << " B " << B << " R " << R << " k " << k << " n " << n;
      const at::Tensor combined = kvc::per_head_combine_rows(z.to(dtype), m);
      ASSERT_TRUE(combined.defined());
      EXPECT_LT((combined.to(at::kDouble) - at::bmm(z, whole.narrow(1, 0, k))).abs().max().item<double>(), tol)
          << c10::toString(dtype) << " B " << B << " R " << R << " k " << k << " n " << n;
    }
  }
  // Declined (the caller falls back to at::bmm): mixed types, rows not contiguous, mismatched sizes.
  const at::Tensor m = at::randn({2, 4, 8});
  EXPECT_FALSE(kvc::per_head_dot_rows(at::randn({2, 1, 8}, at::kDouble), m).defined());
  EXPECT_FALSE(kvc::per_head_dot_rows(at::randn({2, 1, 8}), m.transpose(1, 2).contiguous().transpose(1, 2)).defined());
  EXPECT_FALSE(kvc::per_head_combine_rows(at::randn({2, 1, 5}), m).defined());
}

struct AttentionCase {
  int64_t heads, kv_heads, entries, head_dim, window;
  bool shuffled_positions;
};

// The kernels' at::parallel_for was once compiled without OpenMP and ran every kernel on one core.
TEST(KernelBuild, ParallelForIsCompiledWithOpenMP) { EXPECT_TRUE(kvc::kernels_run_in_parallel()); }

// One OpenMP runtime for LibTorch and our code (PyPI's wheel carries its own libgomp): the count that
// at::set_num_threads (--threads) sets inside LibTorch is the one our parallel regions run with.
TEST(KernelBuild, ThreadCountReachesOurParallelRegions) {
  const int before = at::get_num_threads();
  for (const int n : {1, 3}) {
    at::set_num_threads(n);
    EXPECT_EQ(omp_get_max_threads(), n);
    std::atomic<int> mask{0};
    at::parallel_for(0, 3000, 1, [&](int64_t, int64_t) { mask |= 1 << omp_get_thread_num(); });
    EXPECT_EQ(__builtin_popcount(mask.load()), n);
  }
  at::set_num_threads(before);
}

// The levels decode attention's passes run on here: AVX2, and AVX-512 where the CPU has it.
std::vector<kvc::BlockIsa> attention_levels() {
  std::vector<kvc::BlockIsa> levels{kvc::BlockIsa::Avx2};
  if (kvc::best_block_isa() == kvc::BlockIsa::Avx512Vnni) levels.push_back(kvc::BlockIsa::Avx512Vnni);
  return levels;
}

TEST_F(KernelTest, DecodeAttentionMatchesBruteForce) {
  const AttentionCase cases[] = {{8, 4, 95, 8, 0, false}, {6, 2, 1000, 32, 0, true}, {12, 12, 513, 64, 0, false},
                                 {4, 1, 7, 16, 0, false}, {8, 2, 300, 32, 64, true}, {2, 2, 1, 8, 0, false}};
  for (const kvc::BlockIsa level : attention_levels()) {
    kvc::limit_block_isa(level);
    for (const auto& c : cases) {
      const at::Tensor q = at::randn({c.heads, 1, c.head_dim}) * 2;
      // Keys and values inside larger buffers, as a cache with spare capacity holds them.
      const at::Tensor k = at::randn({c.kv_heads, c.entries + 5, c.head_dim}).narrow(1, 0, c.entries);
      const at::Tensor v = at::randn({c.kv_heads, c.entries + 5, c.head_dim}).narrow(1, 0, c.entries);
      at::Tensor pos = at::arange(c.entries, at::kLong).unsqueeze(0).repeat({c.kv_heads, 1});
      if (c.shuffled_positions)
        pos = at::stack({at::randperm(c.entries, at::kLong), at::randperm(c.entries, at::kLong)})
                  .narrow(0, 0, c.kv_heads);
      // A query in the middle sees only part of the entries when positions are shuffled.
      const int64_t q_pos = c.shuffled_positions ? c.entries / 2 : c.entries - 1;
      const at::Tensor fast = kvc::fast_decode_attention(q, q_pos, k, v, pos, c.window);
      ASSERT_TRUE(fast.defined());
      const at::Tensor expected = brute_force_attention(q, q_pos, k, v, pos, c.window);
      // fp32 with an online softmax (partial sums rescaled per key chunk): a few 1e-6 off float64.
      EXPECT_LT((fast.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5)
          << c.heads << "/" << c.kv_heads << " heads, " << c.entries << " entries, d " << c.head_dim << ", "
          << kvc::block_isa_name(level);
    }
  }
  kvc::limit_block_isa(kvc::BlockIsa::Avx512Vnni);
}

TEST_F(KernelTest, DecodeAttentionReportsTheAttentionRow) {
  const int64_t H = 6, KV = 2, S = 77, d = 32, q_pos = 60;
  const at::Tensor q = at::randn({H, 1, d}), k = at::randn({KV, S, d}), v = at::randn({KV, S, d});
  const at::Tensor pos = at::stack({at::randperm(S, at::kLong), at::randperm(S, at::kLong)});
  at::Tensor probs;
  ASSERT_TRUE(kvc::fast_decode_attention(q, q_pos, k, v, pos, 0, &probs).defined());
  ASSERT_EQ(probs.sizes(), (std::vector<int64_t>{H, S}));
  for (int64_t h = 0; h < H; ++h) {
    at::Tensor scores = at::mv(k[h / 3].to(at::kDouble), q[h][0].to(at::kDouble)) / std::sqrt(double(d));
    scores.masked_fill_(pos[h / 3] > q_pos, -std::numeric_limits<double>::infinity());
    EXPECT_LT((probs[h].to(at::kDouble) - at::softmax(scores, 0)).abs().max().item<double>(), 1e-6) << h;
  }
}

// Caches longer than one chunk of entries (the kernel splits each KV head's entries into chunks of 256
// and merges their softmax partials): one KV head (Gemma 3), three (SmolLM2), groups of five (two passes
// over each chunk), head sizes 32..256 and a generic 96, a sliding window over entries in position
// order (whole chunks out of it) and shuffled positions; fp32 and f16 rows.
TEST_F(KernelTest, DecodeAttentionOverManyChunksMatchesBruteForce) {
  const AttentionCase cases[] = {{4, 1, 1100, 256, 0, false},   {9, 3, 700, 64, 0, false},  {5, 1, 600, 32, 0, true},
                                 {4, 1, 1024, 256, 512, false}, {6, 2, 777, 96, 300, true}, {3, 3, 257, 128, 0, false},
                                 {8, 2, 513, 64, 100, false}};
  for (const kvc::BlockIsa level : attention_levels()) {
    kvc::limit_block_isa(level);
    for (const auto& c : cases) {
      for (const at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16}) {
        const at::Tensor q = at::randn({c.heads, 1, c.head_dim}) * 2;
        const at::Tensor k = at::randn({c.kv_heads, c.entries + 3, c.head_dim}).to(type).narrow(1, 0, c.entries);
        const at::Tensor v = at::randn({c.kv_heads, c.entries + 3, c.head_dim}).to(type).narrow(1, 0, c.entries);
        at::Tensor pos = at::arange(c.entries, at::kLong).unsqueeze(0).repeat({c.kv_heads, 1});
        if (c.shuffled_positions) {
          std::vector<at::Tensor> rows;
          for (int64_t h = 0; h < c.kv_heads; ++h) rows.push_back(at::randperm(c.entries, at::kLong));
          pos = at::stack(rows);
        }
        const int64_t q_pos = c.shuffled_positions ? c.entries * 2 / 3 : c.entries - 1;
        at::Tensor probs;
        const at::Tensor fast = kvc::fast_decode_attention(q, q_pos, k, v, pos, c.window, &probs);
        ASSERT_TRUE(fast.defined());
        at::Tensor expected_probs;
        const at::Tensor expected =
            brute_force_attention(q, at::tensor({q_pos}, at::kLong), k, v, pos, c.window, &expected_probs);
        const std::string what =
            fmt::format("{}/{} heads, {} entries, d {}, window {}, {}, {}", c.heads, c.kv_heads, c.entries, c.head_dim,
                        c.window, c10::toString(type), kvc::block_isa_name(level));
        EXPECT_LT((fast.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5) << what;
        EXPECT_LT((probs.to(at::kDouble) - expected_probs.squeeze(1)).abs().max().item<double>(), 1e-6) << what;
      }
    }
  }
  kvc::limit_block_isa(kvc::BlockIsa::Avx512Vnni);
}

// The chunks depend on the entry count only: one thread and two give the same bits.
TEST_F(KernelTest, DecodeAttentionDoesNotDependOnTheThreadCount) {
  const int64_t H = 9, KV = 3, S = 1500, d = 64;
  const at::Tensor q = at::randn({H, 1, d}), k = at::randn({KV, S, d}).to(at::kHalf),
                   v = at::randn({KV, S, d}).to(at::kHalf);
  const at::Tensor pos = at::arange(S, at::kLong).unsqueeze(0).repeat({KV, 1});
  at::Tensor probs_two, probs_one;
  const at::Tensor two = kvc::fast_decode_attention(q, S, k, v, pos, 0, &probs_two);
  at::set_num_threads(1);
  const at::Tensor one = kvc::fast_decode_attention(q, S, k, v, pos, 0, &probs_one);
  at::set_num_threads(2);
  EXPECT_TRUE(one.equal(two));
  EXPECT_TRUE(probs_one.equal(probs_two));
}

TEST_F(KernelTest, PrefillAttentionMatchesBruteForce) {
  // Long enough prompts split into several query blocks and key chunks per head; windows; unsorted
  // positions as a compressed cache holds them; head sizes with and without an 8-column tail.
  const AttentionCase cases[] = {{8, 4, 95, 8, 0, false},    {6, 2, 1000, 32, 0, false}, {3, 1, 1200, 16, 0, false},
                                 {4, 2, 700, 32, 50, false}, {4, 2, 300, 8, 0, true},    {4, 2, 300, 8, 40, true},
                                 {2, 2, 333, 24, 0, false},  {2, 1, 260, 64, 0, true}};
  for (const auto& c : cases) {
    const int64_t T = std::min<int64_t>(c.entries, 200);
    const at::Tensor q = at::randn({c.heads, T, c.head_dim}) * 2;
    const at::Tensor k = at::randn({c.kv_heads, c.entries + 5, c.head_dim}).narrow(1, 0, c.entries);
    const at::Tensor v = at::randn({c.kv_heads, c.entries + 5, c.head_dim}).narrow(1, 0, c.entries);
    at::Tensor pos = at::arange(c.entries, at::kLong).unsqueeze(0).repeat({c.kv_heads, 1});
    // Queries are the last T entries (a prefill after a cached prefix) or random positions.
    at::Tensor q_pos = at::arange(c.entries - T, c.entries, at::kLong);
    if (c.shuffled_positions) {
      pos =
          at::stack({at::randperm(c.entries, at::kLong), at::randperm(c.entries, at::kLong)}).narrow(0, 0, c.kv_heads);
      q_pos = std::get<0>(at::randint(c.entries, {T}, at::kLong).sort());
    }
    const at::Tensor fast = kvc::fast_prefill_attention(q, q_pos, k, v, pos, c.window);
    ASSERT_TRUE(fast.defined());
    const at::Tensor expected = brute_force_attention(q, q_pos, k, v, pos, c.window);
    // fp32 with an online softmax (partial sums rescaled per key chunk): a few 1e-6 off float64.
    EXPECT_LT((fast.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5)
        << c.heads << "/" << c.kv_heads << " heads, " << c.entries << " entries, d " << c.head_dim << ", window "
        << c.window;
  }
}

// The statistics come from the kernel's own pass (kept exponentials rescaled per chunk), so they are
// checked against the float64 probabilities of the definition, for the shapes above and for windows
// that end inside, span and exceed the last query block.
TEST_F(KernelTest, PrefillStatisticsMatchBruteForceProbabilities) {
  const AttentionCase cases[] = {{8, 4, 95, 8, 0, false}, {6, 2, 1000, 32, 0, false}, {4, 2, 700, 32, 50, false},
                                 {4, 2, 300, 8, 0, true}, {4, 2, 300, 8, 40, true},   {2, 1, 260, 64, 0, true}};
  for (const auto& c : cases) {
    const int64_t T = std::min<int64_t>(c.entries, 200);
    const at::Tensor q = at::randn({c.heads, T, c.head_dim}) * 2;
    const at::Tensor k = at::randn({c.kv_heads, c.entries, c.head_dim});
    const at::Tensor v = at::randn({c.kv_heads, c.entries, c.head_dim});
    at::Tensor pos = at::arange(c.entries, at::kLong).unsqueeze(0).repeat({c.kv_heads, 1});
    at::Tensor q_pos = at::arange(c.entries - T, c.entries, at::kLong);
    if (c.shuffled_positions) {
      pos =
          at::stack({at::randperm(c.entries, at::kLong), at::randperm(c.entries, at::kLong)}).narrow(0, 0, c.kv_heads);
      q_pos = std::get<0>(at::randint(c.entries, {T}, at::kLong).sort());
    }
    at::Tensor probs;
    const at::Tensor expected = brute_force_attention(q, q_pos, k, v, pos, c.window, &probs);
    for (const int64_t window : {int64_t{0}, int64_t{1}, int64_t{30}, T, T + 7}) {
      kvc::PrefillStatistics stats{window != 1, window};
      const at::Tensor fast = kvc::fast_prefill_attention(q, q_pos, k, v, pos, c.window, &stats);
      ASSERT_TRUE(fast.defined());
      const std::string what = std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) + " heads, " +
                               std::to_string(c.entries) + " entries, window " + std::to_string(c.window) +
                               ", probe window " + std::to_string(window);
      EXPECT_LT((fast.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5) << what;
      if (window != 1) {
        ASSERT_TRUE(stats.column_sums.defined()) << what;
        ASSERT_EQ(stats.column_sums.sizes(), (at::IntArrayRef{c.heads, c.entries})) << what;
        // Each query's row sums to 1 and a column sum is at most T: an absolute bound relative to T.
        EXPECT_LT((stats.column_sums.to(at::kDouble) - probs.sum(1)).abs().max().item<double>(), 1e-5 * T) << what;
      } else {
        EXPECT_FALSE(stats.column_sums.defined()) << what;
      }
      const int64_t kept_rows = std::min(window, T);
      if (kept_rows == 0) {
        EXPECT_FALSE(stats.window_probs.defined()) << what;
        continue;
      }
      ASSERT_EQ(stats.window_probs.sizes(), (at::IntArrayRef{c.heads, kept_rows, c.entries})) << what;
      EXPECT_LT(
          (stats.window_probs.to(at::kDouble) - probs.narrow(1, T - kept_rows, kept_rows)).abs().max().item<double>(),
          1e-6)
          << what;
    }
  }
}

// Column sums are added per stripe and the stripes in order: the same bits on one thread or several.
TEST_F(KernelTest, PrefillColumnSumsDoNotDependOnTheThreadCount) {
  const at::Tensor q = at::randn({4, 900, 32}), k = at::randn({2, 900, 32}), v = at::randn({2, 900, 32});
  const at::Tensor pos = at::arange(900, at::kLong).unsqueeze(0).repeat({2, 1});
  const at::Tensor q_pos = at::arange(900, at::kLong);
  std::vector<at::Tensor> sums;
  for (const int threads : {1, 2, 3}) {
    at::set_num_threads(threads);
    kvc::PrefillStatistics stats{true, 32};
    ASSERT_TRUE(kvc::fast_prefill_attention(q, q_pos, k, v, pos, 0, &stats).defined());
    sums.push_back(stats.column_sums);
  }
  at::set_num_threads(2);
  EXPECT_TRUE(at::equal(sums[0], sums[1]));
  EXPECT_TRUE(at::equal(sums[0], sums[2]));
}

TEST_F(KernelTest, DecodeAttentionWithNothingVisibleIsZero) {
  const at::Tensor q = at::randn({2, 1, 8}), k = at::randn({1, 3, 8}), v = at::randn({1, 3, 8});
  const at::Tensor pos = at::tensor({5, 6, 7}, at::kLong).unsqueeze(0);
  const at::Tensor out = kvc::fast_decode_attention(q, 4, k, v, pos, 0);
  ASSERT_TRUE(out.defined());
  EXPECT_EQ(out.abs().max().item<float>(), 0.0f);
}

TEST_F(KernelTest, DecodeAttentionDeclinesOddHeadDims) {
  const at::Tensor q = at::randn({2, 1, 6}), k = at::randn({1, 3, 6}), v = at::randn({1, 3, 6});
  EXPECT_FALSE(kvc::fast_decode_attention(q, 3, k, v, at::arange(3, at::kLong).unsqueeze(0), 0).defined());
}

TEST_F(KernelTest, GatedActivationMatchesLibTorch) {
  for (const bool gelu : {false, true}) {
    for (const auto& [T, inter] : std::vector<std::pair<int64_t, int64_t>>{{1, 1536}, {3, 13}, {2, 2048}}) {
      const at::Tensor gate_up = at::randn({T, 2 * inter}) * 4;
      // Large gates of both signs, where exp saturates.
      gate_up.narrow(1, 0, 4).copy_(at::tensor({-100.0f, 100.0f, -30.0f, 30.0f}).expand({T, 4}));
      const at::Tensor fast = kvc::fast_gated_activation(gate_up, inter, gelu);
      ASSERT_TRUE(fast.defined());
      const at::Tensor g = gate_up.narrow(1, 0, inter).to(at::kDouble),
                       up = gate_up.narrow(1, inter, inter).to(at::kDouble);
      const at::Tensor expected = (gelu ? at::gelu(g, "tanh") : at::silu(g)) * up;
      EXPECT_LT(((fast.to(at::kDouble) - expected).abs() / (expected.abs() + 1e-3)).max().item<double>(), 2e-6)
          << (gelu ? "gelu" : "silu") << " " << T << "x" << inter;
    }
  }
  EXPECT_FALSE(kvc::fast_gated_activation(at::randn({2, 10}).t(), 1, false).defined());  // not contiguous
}

TEST_F(KernelTest, RmsNormMatchesFloat64Formula) {
  for (int64_t h : {8, 64, 768, 1001}) {
    const at::Tensor x = at::randn({5, h}) * 3, w = at::randn({h});
    const at::Tensor y = kvc::fast_rms_norm(x, w, 1e-5);
    ASSERT_TRUE(y.defined());
    const at::Tensor xd = x.to(at::kDouble);
    const at::Tensor expected = w.to(at::kDouble) * xd * at::rsqrt(xd.pow(2).mean(-1, true) + 1e-5);
    EXPECT_LT((y.to(at::kDouble) - expected).abs().max().item<double>(), 1e-5) << h;
  }
}

TEST_F(KernelTest, FloatRopeMatchesFloat64RotationAndInverts) {
  kvc::ModelConfig config;
  config.head_dim = 32;
  config.max_position_embeddings = 64;  // positions beyond it grow the table
  config.rope_theta = 10000.0;
  const kvc::Rope rope(config, at::kCPU);
  // A strided [heads, T, d] view, as the model hands queries over; positions shared or per head.
  const at::Tensor x = at::randn({7, 4, 32}).transpose(0, 1);
  const at::Tensor shared = at::tensor({0, 3, 100, 5000, 9, 2, 1}, at::kLong);
  const at::Tensor per_head = at::randint(3000, {4, 7}, at::kLong);
  for (const at::Tensor& pos : {shared, per_head}) {
    const at::Tensor fast = rope.apply(x, pos);
    const at::Tensor exact = rope.apply(x.to(at::kDouble), pos);  // the generic float64 path
    EXPECT_LT((fast.to(at::kDouble) - exact).abs().max().item<double>(), 1e-5);
    EXPECT_LT((rope.unapply(fast, pos) - x).abs().max().item<float>(), 1e-5);
  }
}

// Gate training backpropagates through the whole forward pass; a kernel that wrote its output through
// raw pointers would cut the gradient there. While gradients are recorded the fast paths step aside
// (and the differentiable ops give the exact gradient); without recording they still run.
TEST_F(KernelTest, FastPathsStepAsideWhileGradientsAreRecorded) {
  kvc::ModelConfig config;
  config.head_dim = 16;
  config.max_position_embeddings = 64;
  config.rope_theta = 10000.0;
  const kvc::Rope rope(config, at::kCPU);
  const at::Tensor pos = at::arange(5, at::kLong);
  const at::Tensor x = at::randn({2, 5, 16}).requires_grad_();
  const at::Tensor y = rope.apply(x, pos);
  ASSERT_TRUE(y.requires_grad()) << "RoPE cut the gradient";
  const at::Tensor g = at::randn({2, 5, 16});
  (y * g).sum().backward();
  // RoPE is a rotation: the gradient of <R x, g> with respect to x is R^T g, the inverse rotation of g.
  EXPECT_LT((x.grad() - rope.unapply(g, pos)).abs().max().item<float>(), 1e-5);

  const at::Tensor h = at::randn({3, 64}).requires_grad_();
  const at::Tensor w = at::randn({64}), m = at::randn({32, 64}), row = at::randn({64}).requires_grad_();
  EXPECT_FALSE(kvc::fast_rms_norm(h, w, 1e-6).defined());
  EXPECT_FALSE(kvc::fast_matvec(m, row, {}).defined());
  const at::Tensor q = at::randn({4, 1, 16}).requires_grad_(), k = at::randn({2, 6, 16}), v = at::randn({2, 6, 16});
  EXPECT_FALSE(kvc::fast_decode_attention(q, 6, k, v, at::arange(6, at::kLong).expand({2, 6}), 0, nullptr).defined());
  {
    at::NoGradGuard no_grad;
    EXPECT_TRUE(kvc::fast_rms_norm(h, w, 1e-6).defined());
    EXPECT_TRUE(kvc::fast_matvec(m, row, {}).defined());
    EXPECT_FALSE(rope.apply(x, pos).requires_grad());
  }
}

}  // namespace
