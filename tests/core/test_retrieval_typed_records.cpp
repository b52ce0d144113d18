// The retrieval store's records in the cache types (--cache-type-k/-v): each record takes its type's
// bytes, reads back as that type rounds it (f16/bf16 against ATen's own conversion, q8_0/q4_0 within
// their block's error bound), entries still in a RAM tail read back like those on pages, a committed
// store checks against its manifest's types, and a whole retrieval run with an f16 or q8_0 store stays
// close to the f32 store with the bytes the type implies.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <random>

#include "cache/cache_types.h"
#include "compression/compression_spec.h"
#include "eval/kl_divergence.h"
#include "model/llama_model.h"
#include "retrieval/page_store.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/cli_expectations.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/safetensors_rewrite.h"

namespace kvc::retrieval {
namespace {

constexpr int64_t kDim = 64;

EntryBlock random_block(int64_t n, int64_t first_pos, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  EntryBlock b(kDim);
  std::vector<float> k(kDim), v(kDim);
  for (int64_t i = 0; i < n; ++i) {
    for (auto& x : k) x = normal(rng);
    for (auto& x : v) x = normal(rng);
    b.push(k.data(), v.data(), first_pos + i);
  }
  return b;
}

std::string temp_file(const std::string& name) { return test::make_temp_dir("kvc-typed-store") + "/" + name; }

// What a row of `type` must read back as: ATen's rounding for the 16-bit types; for the block types,
// within the format's error bound (plus the scale's own f16 rounding): q8_0 rounds to the nearest of
// ±127 steps of amax/127, half a step; q4_0 has the 16 levels -8..7 of a step of amax/8 signed like the
// largest value, so a value of the other sign near amax clips to 7 steps: a whole step.
void expect_rounded(const float* got, const float* row, at::ScalarType type) {
  const at::Tensor x = at::from_blob(const_cast<float*>(row), {1, kDim}, at::kFloat);
  if (!is_block_format(type)) {
    const at::Tensor want = x.to(type).to(at::kFloat);
    for (int64_t t = 0; t < kDim; ++t) ASSERT_EQ(got[t], want[0][t].item<float>()) << cache_type_name(type) << " " << t;
    return;
  }
  const double levels = type == kCacheQ8_0 ? 127.0 : 8.0, steps_off = type == kCacheQ8_0 ? 0.5 : 1.0;
  for (int64_t b = 0; b < kDim / kRowBlockValues; ++b) {
    double amax = 0;
    for (int64_t t = b * kRowBlockValues; t < (b + 1) * kRowBlockValues; ++t)
      amax = std::max(amax, std::fabs(double(row[t])));
    const double step = amax / levels;
    for (int64_t t = b * kRowBlockValues; t < (b + 1) * kRowBlockValues; ++t)
      ASSERT_LE(std::fabs(double(got[t]) - row[t]), steps_off * step + 2e-3 * amax + 1e-6)
          << cache_type_name(type) << " " << t;
  }
}

class TypedRecords : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(TypedRecords, TakeTheirBytesAndReadBackRounded) {
  const at::ScalarType keys = parse_cache_type(GetParam().first, "-ctk");
  const at::ScalarType values = parse_cache_type(GetParam().second, "-ctv");
  const RecordFormat format = record_format(kDim, {keys, values});
  PageStore store(temp_file("t.kvs"), format, Layout::kDualHead, /*direct_io=*/false);
  EXPECT_EQ(store.record_bytes(), stored_row_bytes(keys, kDim) + stored_row_bytes(values, kDim) + 8);
  EXPECT_LT(store.record_bytes(), RecordFormat{kDim}.record_bytes());
  const int64_t pp = store.per_page();
  // Whole pages plus a RAM tail, then appends across a page boundary.
  EntryBlock truth = random_block(2 * pp + 5, 0, 7);
  const int64_t uid = store.create(truth);
  const EntryBlock more = random_block(pp, 10000, 8);
  for (int64_t i = 0; i < more.size(); ++i) store.append(uid, more.key(i), more.value(i), more.positions[i]);
  truth.append(more);
  const EntryBlock got = store.read({uid}).front();
  ASSERT_EQ(got.size(), truth.size());
  for (int64_t i = 0; i < truth.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(got.positions[i], truth.positions[i]);
    expect_rounded(got.key(i), truth.key(i), keys);
    expect_rounded(got.value(i), truth.value(i), values);
  }
  // A committed store checks against its manifest, types included.
  const StoreManifest m = store.commit();
  EXPECT_EQ(m.key_type, format.keys);
  EXPECT_EQ(m.value_type, format.values);
  PageStore::verify(store.path(), m);
  StoreManifest other = m;
  other.key_type = format.keys == RecordType::kF16 ? RecordType::kBF16 : RecordType::kF16;
  test::expect_error([&] { PageStore::verify(store.path(), other); }, "its header page is damaged");
}

INSTANTIATE_TEST_SUITE_P(KeyAndValueTypes, TypedRecords,
                         ::testing::Values(std::make_pair("f16", "f16"), std::make_pair("bf16", "bf16"),
                                           std::make_pair("q8_0", "q8_0"), std::make_pair("q4_0", "q4_0"),
                                           std::make_pair("f16", "q8_0")));

TEST(TypedRecords, BlockTypesNeedWholeBlocks) {
  test::expect_error(
      [] {
        PageStore(temp_file("b.kvs"), RecordFormat{40, RecordType::kQ8_0}, Layout::kDualHead, false);
      },
      "q8_0/q4_0 records need a head_dim that is a multiple of 32, got 40");
  test::expect_error(
      [] {
        record_format(64, {at::kDouble, at::kFloat});
      },
      "--retrieval: the store cannot keep records in f64");
}

// A retrieval run on kvc-micro-lm (head_dim 32) whose store holds f16 or q8_0 records: the payload is the
// type's bytes and the KL against the exact model stays within a small margin of the f32 store's.
TEST(TypedRecords, RetrievalRunsOnTypedStores) {
  std::vector<int> ids = {1};
  for (int i = 1; i < 480; ++i) ids.push_back((i * 131 + 7) % 2000 + 3);
  KlOptions options;
  options.plan.window = 240;
  CompressionSpec spec;
  spec.retrieval = "adaptive:budget=64";
  const auto run = [&](const std::string& type) {
    LoadOptions load;
    load.cache_types = {parse_cache_type(type, "-ctk"), parse_cache_type(type, "-ctv")};
    const auto model = LlamaModel::load(test::model_dir("kvc-micro-lm"), load);
    return evaluate_kl(*model, ids, options, build_cache_setup(spec, *model), false);
  };
  const KlResult f32 = run("f32"), f16 = run("f16"), q8 = run("q8_0");
  EXPECT_EQ(2 * f16.compressed_kv_bytes, f32.compressed_kv_bytes);
  EXPECT_EQ(f32.compressed_kv_bytes * 34 / 128, q8.compressed_kv_bytes);  // 34 bytes per 32 values
  EXPECT_GT(f32.mean_kl, 0.0);
  EXPECT_NEAR(f16.mean_kl, f32.mean_kl, 1e-3 + 0.05 * f32.mean_kl);
  EXPECT_NEAR(q8.mean_kl, f32.mean_kl, 1e-2 + 0.2 * f32.mean_kl);
}

// kvc-cluster build writes the record types into the store and its index; verify checks them, and an
// index naming a type no store holds is refused in one line.
TEST(TypedRecords, ClusterIndexCarriesTheTypes) {
  const std::string dir = test::make_temp_dir("kvc-typed-index");
  const auto built =
      test::run_command(test::bin("kvc-cluster") + " build -m " + test::model_dir("stories260K") +
                        " -p 'Once upon a time there was a little girl named Lily' -ctk f16 -ctv bf16 --store " + dir +
                        "/s.kvs --index " + dir + "/s.safetensors");
  ASSERT_EQ(built.exit_code, 0) << built.err;
  const auto ok = test::run_command(test::bin("kvc-cluster") + " verify --index " + dir + "/s.safetensors");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  std::string bytes;
  {
    std::ifstream in(dir + "/s.safetensors", std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const size_t at = bytes.find("\"key_type\":\"1\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 12] = '9';  // same length: the header stays valid JSON, but no longer what kvc wrote
  std::ofstream(dir + "/edited.safetensors", std::ios::binary) << bytes;
  test::expect_clean_error(
      test::run_command(test::bin("kvc-cluster") + " verify --index " + dir + "/edited.safetensors"),
      "fails its checksum");
  // The same type written with a valid checksum, as a tool that meant it would: the type check refuses it.
  test::rewrite_safetensors(dir + "/s.safetensors", dir + "/typed.safetensors",
                            [](test::TensorBytes&, test::Metadata& metadata) { metadata["key_type"] = "9"; });
  test::expect_clean_error(
      test::run_command(test::bin("kvc-cluster") + " verify --index " + dir + "/typed.safetensors"),
      "unknown record type 9 in 'key_type'");
}

}  // namespace
}  // namespace kvc::retrieval
