// Typed caches (--cache-type-k / --cache-type-v): 16-bit entries hold half the bytes and ggml blocks
// (q8_0, q4_0) their block bytes; the decode kernel reads every format as stored and agrees with a
// float64 computation over the same stored values; every press runs on them, and what a format cannot
// hold (a head_dim that is not whole blocks, in-place merging, methods with their own precision) is
// refused in one line.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "eval/kl_divergence.h"
#include "kernels/cpu_features.h"
#include "kernels/decode_attention.h"
#include "lowrank/calibration.h"
#include "lowrank/lowrank_artifacts.h"
#include "model/llama_model.h"
#include "press/press_registry.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/press_names.h"
#include "support/run_command.h"

namespace kvc {
namespace {

std::shared_ptr<LlamaModel> load_with_cache_types(const std::string& model, const std::string& keys,
                                                  const std::string& values) {
  LoadOptions options;
  options.cache_types = {parse_cache_type(keys, "--cache-type-k"), parse_cache_type(values, "--cache-type-v")};
  return LlamaModel::load(test::model_dir(model), options);
}

std::shared_ptr<LlamaModel> load(const std::string& keys, const std::string& values) {
  return load_with_cache_types("stories260K", keys, values);
}

// A fixed 40-token prompt, BOS first (stories260K has 512 tokens).
const std::vector<int> kPrompt = [] {
  std::vector<int> ids = {1};
  for (int i = 1; i < 40; ++i) ids.push_back((i * 37 + 11) % 500 + 3);
  return ids;
}();

// One query's attention in float64 over the stored (rounded) keys and values.
at::Tensor brute_force(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const int64_t H = q.size(0), KV = k.size(0), G = H / KV, d = k.size(2);
  at::Tensor out = at::empty({H, 1, d}, at::kDouble);
  for (int64_t h = 0; h < H; ++h) {
    const at::Tensor scores = at::mv(k[h / G].to(at::kDouble), q[h][0].to(at::kDouble)) / std::sqrt(double(d));
    out[h][0] = at::mv(v[h / G].to(at::kDouble).t(), at::softmax(scores, 0));
  }
  return out;
}

TEST(CacheTypes, DecodeKernelReadsSixteenBitRowsAsStored) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "CPU without AVX2/FMA: the kernel is not used";
  at::manual_seed(3);
  for (at::ScalarType kt : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (at::ScalarType vt : {at::kFloat, at::kHalf, at::kBFloat16}) {
      for (int64_t d : {8, 64, 72}) {  // 72: the kernel's generic head size
        const int64_t H = 4, KV = 2, S = 37;
        const at::Tensor q = at::randn({H, 1, d}), k = at::randn({KV, S, d}).to(kt), v = at::randn({KV, S, d}).to(vt);
        const at::Tensor pos = at::arange(S, at::kLong).repeat({KV, 1});
        const at::Tensor out = fast_decode_attention(q, S, k, v, pos, 0);
        ASSERT_TRUE(out.defined()) << c10::toString(kt) << "/" << c10::toString(vt);
        EXPECT_LT((out.to(at::kDouble) - brute_force(q, k, v)).abs().max().item<double>(), 2e-5)
            << c10::toString(kt) << "/" << c10::toString(vt) << " d=" << d;
      }
    }
  }
}

TEST(CacheTypes, SixteenBitCacheHoldsHalfTheBytesAndStaysClose) {
  const auto full = load("f32", "f32"), half = load("f16", "f16"), brain = load("bf16", "bf16"),
             mixed = load("f32", "bf16");
  EXPECT_EQ(half->cache_types().keys, at::kHalf);
  std::vector<at::Tensor> logits;
  std::vector<int64_t> bytes;
  for (const auto& m : {full, half, brain, mixed}) {
    KVCache cache = m->new_cache();
    m->forward(kPrompt, cache);
    bytes.push_back(cache.footprint().payload_bytes);
    logits.push_back(m->forward({300}, cache));  // a decode step reads the typed entries
  }
  EXPECT_EQ(bytes[1] * 2, bytes[0]);
  EXPECT_EQ(bytes[2] * 2, bytes[0]);
  EXPECT_EQ(bytes[3] * 4, bytes[0] * 3);
  for (size_t i = 1; i < logits.size(); ++i) {
    const double diff = (logits[i] - logits[0]).abs().max().item<double>();
    EXPECT_GT(diff, 0.0) << i << ": the type must take effect";
    EXPECT_LT(diff, i == 1 ? 2e-2 : 1e-1) << i;  // f16 keeps 11 significant bits, bf16 8
  }
}

TEST(CacheTypes, EveryPressRunsOnAHalfCache) {
  const auto full = load("f32", "f32"), half = load("f16", "f16");
  for (const std::string& press : test::ratio_presses()) {
    SCOPED_TRACE(press);
    CompressionSpec spec;
    spec.press = press;
    spec.ratio = 0.5;
    int64_t bytes[2] = {0, 0};
    int i = 0;
    for (const auto& m : {full, half}) {
      const CacheSetup setup = build_cache_setup(spec, *m);
      KVCache cache = setup.new_cache(*m);
      auto observer = setup.new_observer();
      ForwardOptions o;
      o.observer = observer.get();
      m->forward(kPrompt, cache, o);
      const at::Tensor step = m->forward({300}, cache, o);
      EXPECT_TRUE(step.isfinite().all().item<bool>());
      bytes[i++] = cache.footprint().payload_bytes;
    }
    EXPECT_NEAR(static_cast<double>(bytes[1]) / static_cast<double>(bytes[0]), 0.5, 0.02);
  }
}

// kvc-eval kl measures a typed cache against the full-precision one, not against itself.
TEST(CacheTypes, KlReferenceStaysFullPrecision) {
  const auto half = load("f16", "f16");
  std::vector<int> ids;
  for (int i = 0; i < 4; ++i) ids.insert(ids.end(), kPrompt.begin(), kPrompt.end());
  KlOptions options;
  options.plan.window = 60;
  const KlResult r = evaluate_kl(*half, ids, options, CacheSetup{}, false);
  EXPECT_EQ(r.reference_kv_bytes, 2 * r.compressed_kv_bytes);
  EXPECT_GT(r.mean_kl, 0.0);
  EXPECT_LT(r.mean_kl, 1e-4);
}

TEST(CacheTypes, UnknownTypesAreOneLineErrors) {
  test::expect_error([] { parse_cache_type("q5", "--cache-type-k"); }, "unknown cache type 'q5'");
  test::expect_error([] { parse_cache_type("q4_1", "--cache-type-v"); },
                     "--cache-type-v: unknown cache type 'q4_1' (expected f32, f16, bf16, q8_0 or q4_0)");
  EXPECT_EQ(parse_cache_type("auto", "-ctk"), at::ScalarType::Undefined);
  EXPECT_EQ(cache_type_name(parse_cache_type("q8_0", "-ctk")), "q8_0");
  EXPECT_EQ(cache_type_name(parse_cache_type("q4_0", "-ctk")), "q4_0");
}

// --- ggml block formats (q8_0, q4_0): kvc-micro-lm, head_dim 32 (stories260K's 8 is not a whole block).

std::shared_ptr<LlamaModel> load_tiny(const std::string& keys, const std::string& values) {
  return load_with_cache_types("kvc-micro-lm", keys, values);
}

const std::vector<int> kTinyPrompt = [] {
  std::vector<int> ids = {1};
  for (int i = 1; i < 120; ++i) ids.push_back((i * 131 + 7) % 2000 + 3);
  return ids;
}();

TEST(CacheTypes, DecodeKernelReadsBlockRowsAsStored) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "CPU without AVX2/FMA: the kernel is not used";
  at::manual_seed(5);
  const std::vector<at::ScalarType> types = {kCacheQ8_0, kCacheQ4_0, at::kFloat, at::kHalf};
  for (at::ScalarType kt : types) {
    for (at::ScalarType vt : types) {
      if (!is_block_format(kt) && !is_block_format(vt)) continue;
      for (int64_t d : {32, 64, 96, 128}) {  // 96: the kernel's generic head size
        const int64_t H = 6, KV = 2, S = 45;
        const at::Tensor q = at::randn({H, 1, d});
        const at::Tensor k = encode_rows(at::randn({KV, S, d}), kt), v = encode_rows(at::randn({KV, S, d}), vt);
        const at::Tensor pos = at::arange(S, at::kLong).repeat({KV, 1});
        const at::Tensor out = fast_decode_attention(q, S, k, v, pos, 0, nullptr, kt, vt);
        ASSERT_TRUE(out.defined()) << cache_type_name(kt) << "/" << cache_type_name(vt);
        // The reference reads the same blocks through the GGUF reader's decoder, in float64.
        const at::Tensor expected =
            brute_force(q, decode_rows(k, kt, d, at::kDouble), decode_rows(v, vt, d, at::kDouble));
        EXPECT_LT((out.to(at::kDouble) - expected).abs().max().item<double>(), 2e-5)
            << cache_type_name(kt) << "/" << cache_type_name(vt) << " d=" << d;
      }
    }
  }
}

TEST(CacheTypes, BlockCachesHoldTheirBlockBytesAndStayClose) {
  const auto full = load_tiny("f32", "f32"), q8 = load_tiny("q8_0", "q8_0"), q4 = load_tiny("q4_0", "q4_0"),
             mixed = load_tiny("q8_0", "f16");
  std::vector<at::Tensor> logits;
  std::vector<int64_t> bytes;
  for (const auto& m : {full, q8, q4, mixed}) {
    KVCache cache = m->new_cache();
    m->forward(kTinyPrompt, cache);
    bytes.push_back(cache.footprint().payload_bytes);
    at::Tensor step;
    for (int t : {300, 301, 302}) step = m->forward({t}, cache);  // decode steps read the stored blocks
    logits.push_back(at::log_softmax(step.to(at::kDouble), -1));
  }
  // Per 32 values: 128 bytes in f32, 34 in q8_0, 18 in q4_0, 64 in f16.
  EXPECT_EQ(bytes[1] * 128, bytes[0] * 34);
  EXPECT_EQ(bytes[2] * 128, bytes[0] * 18);
  EXPECT_EQ(bytes[3] * 256, bytes[0] * (34 + 64));
  const auto kl = [&](size_t i) { return (logits[0].exp() * (logits[0] - logits[i])).sum(-1).max().item<double>(); };
  EXPECT_GT(kl(1), 0.0);
  EXPECT_LT(kl(1), 1e-3);
  EXPECT_LT(kl(3), 1e-3);
  EXPECT_GT(kl(2), kl(1));  // 4 bits lose more than 8
  EXPECT_LT(kl(2), 5e-2);
}

TEST(CacheTypes, EveryEvictingPressRunsOnABlockCache) {
  const auto full = load_tiny("f32", "f32"), q8 = load_tiny("q8_0", "q4_0");
  for (const std::string& press : test::ratio_presses()) {
    // Re-rotation and merging rewrite rows, which blocks sharing one scale cannot take (a one-line refusal).
    if (test::rewrites_rows(press)) continue;
    SCOPED_TRACE(press);
    CompressionSpec spec;
    spec.press = press == "d2o" ? "d2o:merge=0" : press;
    spec.ratio = 0.5;
    int64_t bytes[2] = {0, 0}, entries[2] = {0, 0};
    int i = 0;
    for (const auto& m : {full, q8}) {
      const CacheSetup setup = build_cache_setup(spec, *m);
      KVCache cache = setup.new_cache(*m);
      auto observer = setup.new_observer();
      ForwardOptions o;
      o.observer = observer.get();
      m->forward(kTinyPrompt, cache, o);
      for (int t : {300, 301}) EXPECT_TRUE(m->forward({t}, cache, o).isfinite().all().item<bool>());
      bytes[i] = cache.footprint().payload_bytes;
      entries[i++] = cache.footprint().entries;
    }
    // The same number of entries may differ slightly (scores see quantized keys); bytes follow entries.
    EXPECT_NEAR(static_cast<double>(entries[1]) / static_cast<double>(entries[0]), 1.0, 0.05);
    EXPECT_NEAR(static_cast<double>(bytes[1]) / static_cast<double>(entries[1]),
                static_cast<double>(bytes[0]) / static_cast<double>(entries[0]) * (34 + 18) / 256.0, 1e-9);
  }
}

TEST(CacheTypes, BlockFormatsRefuseWhatTheyCannotHold) {
  test::expect_error([] { load("q8_0", "f32"); },
                     "--cache-type-k/-v q8_0 / f32: blocks hold 32 values, but this model's head_dim is 8; use f16 or "
                     "bf16");
  const auto q8 = load_tiny("q8_0", "q8_0");
  CompressionSpec merge;
  merge.press = "d2o";
  merge.ratio = 0.5;
  test::expect_error([&] { build_cache_setup(merge, *q8); },
                     "--press d2o merges evicted entries into kept ones, which a q8_0 / q8_0 cache cannot rewrite in "
                     "place");
  merge.press = "merging";  // no merge=0 to offer: merging is the whole press
  test::expect_error([&] { build_cache_setup(merge, *q8); },
                     "--press merging merges evicted entries into kept ones, which a q8_0 / q8_0 cache cannot rewrite "
                     "in place (its rows are blocks sharing one scale); use --cache-type-k/-v f16 or bf16");
  CompressionSpec decoding;  // scores the cache again while decoding: it reads every key back
  decoding.press = "decoding:base=knorm";
  test::expect_error([&] { build_cache_setup(decoding, *q8); },
                     "--press decoding reads every cached key back to score the cache again while decoding, which a "
                     "q8_0 / q8_0 cache holds only as blocks; use --cache-type-k/-v f16 or bf16");
  // Re-rotation rewrites keys once the prompt is compressed: refused then, naming what to use instead.
  CompressionSpec finch;
  finch.press = "finch:window=4";
  finch.ratio = 0.5;
  const CacheSetup setup = build_cache_setup(finch, *q8);
  test::expect_error(
      [&] {
        KVCache cache = setup.new_cache(*q8);
        auto observer = setup.new_observer();
        ForwardOptions o;
        o.observer = observer.get();
        q8->forward(kTinyPrompt, cache, o);
      },
      "a cache of blocks (q8_0, q4_0: rows sharing one scale) cannot take; use --cache-type-k/-v f16, bf16 or f32, "
      "or finch:rerotate=0");
}

// Low-rank coefficients in a 16-bit cache type: half the bytes of the fp32 coefficients, with or
// without a press, and logits near the fp32 low-rank cache's; a block type is refused in one line.
TEST(CacheTypes, LowRankCoefficientsTakeTheCacheType) {
  const auto full = load("f32", "f32");
  const std::string dir = test::make_temp_dir("kvc-typed-lowrank");
  std::vector<int> ids;
  for (int i = 0; i < 8; ++i) ids.insert(ids.end(), kPrompt.begin(), kPrompt.end());
  lowrank::CalibrationOptions calibration;
  calibration.seq_len = 40;
  calibration.show_progress = false;
  lowrank::write_artifact(dir + "/bases.safetensors",
                          lowrank::bases_artifact(lowrank::calibrate(*full, ids, calibration)), full->config());
  for (const std::string press : {"", "snapkv:heads=shared"}) {
    CompressionSpec spec;
    spec.lowrank_file = dir + "/bases.safetensors";
    spec.rank = 12;
    spec.press = press;
    spec.ratio = press.empty() ? 0.0 : 0.5;
    int64_t bytes[2];
    at::Tensor logits[2];
    int i = 0;
    for (const auto& m : {full, load("f16", "f16")}) {
      const CacheSetup setup = build_cache_setup(spec, *m);
      KVCache cache = setup.new_cache(*m);
      auto observer = setup.new_observer();
      ForwardOptions o;
      o.observer = observer.get();
      m->forward(kPrompt, cache, o);
      logits[i] = m->forward({300}, cache, o);
      bytes[i++] = cache.footprint().payload_bytes;
    }
    EXPECT_EQ(2 * bytes[1], bytes[0]) << press;
    EXPECT_LT((logits[0] - logits[1]).abs().max().item<double>(), 0.05) << press;
  }
  const auto tiny = load_tiny("f32", "f32"), q8 = load_tiny("q8_0", "f16");
  lowrank::write_artifact(dir + "/tiny.safetensors",
                          lowrank::bases_artifact(lowrank::calibrate(*tiny, ids, calibration)), tiny->config());
  CompressionSpec lowrank;
  lowrank.lowrank_file = dir + "/tiny.safetensors";
  lowrank.rank = 4;
  test::expect_error([&] { build_cache_setup(lowrank, *q8); },
                     "--lowrank stores a different number of coefficients per token, which q8_0 blocks of 32 values "
                     "do not fit; use --cache-type-k/-v f32, f16 or bf16 with --lowrank");
}

}  // namespace
}  // namespace kvc
