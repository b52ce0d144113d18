// The variable-rank cache against brute force: per-token truncation in the basis, CSR storage,
// attention equal to dense attention over explicitly rebuilt keys/values, retain(), footprint;
// the gate's mask; PCA bases; artifacts refused for another model; presses the shared latent cannot
// serve refused at setup.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "lowrank/covariance.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/lowrank_setup.h"
#include "lowrank/rank_gate.h"
#include "model/llama_model.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

constexpr int64_t kKv = 2, kD = 4, kH = 4, kDkv = kKv * kD;
const auto kF64 = at::TensorOptions().dtype(at::kDouble);

ModelConfig tiny_config() {
  ModelConfig c;
  c.num_heads = kH;
  c.num_kv_heads = kKv;
  c.head_dim = kD;
  c.hidden_size = kH * kD;
  c.max_position_embeddings = 256;
  return c;
}

std::shared_ptr<RankedProjection> random_projection(bool gated, int64_t rank) {
  auto p = std::make_shared<RankedProjection>();
  // Non-orthogonal U so U^{-1} != Uᵀ is exercised.
  p->U = at::eye(kDkv, kF64) + 0.3 * at::randn({kDkv, kDkv}, kF64);
  p->U_inv = at::linalg_inv(p->U);
  if (gated) {
    p->W = at::randn({kDkv, kDkv}, kF64);
    p->b = at::randn({kDkv}, kF64);
  }
  p->fixed_rank = rank;
  p->tau = 0.3;
  return p;
}

// Brute force: x U, keep each token's first r coefficients, map back with U^{-1}; [n_kv, T, d].
at::Tensor truncate(const at::Tensor& x, const RankedProjection& p, const at::Tensor& ranks) {
  const int64_t T = x.size(1);
  const at::Tensor c = x.transpose(0, 1).reshape({T, kDkv}).matmul(p.U);
  const at::Tensor keep = at::arange(kDkv, at::kLong).unsqueeze(0) < ranks.unsqueeze(1);
  return (c * keep.to(at::kDouble)).matmul(p.U_inv).view({T, kKv, kD}).transpose(0, 1);
}

TEST(LowRankGate, SoftMaskIsNonIncreasingFromOneAndHardRankCountsIt) {
  at::manual_seed(1);
  const at::Tensor c = at::randn({20, kDkv}, kF64), W = at::randn({kDkv, kDkv}, kF64), b = at::randn({kDkv}, kF64);
  const at::Tensor m = soft_mask(c, W, b);
  EXPECT_TRUE(at::allclose(m.select(1, 0), at::ones({20}, kF64)));
  EXPECT_TRUE((m.narrow(1, 1, kDkv - 1) <= m.narrow(1, 0, kDkv - 1) + 1e-12).all().item<bool>());
  const at::Tensor p = at::softmax(c.matmul(W) + b, -1);
  const at::Tensor r = hard_ranks(c, W, b, 0.3);
  for (int64_t t = 0; t < 20; ++t) {
    int64_t expect = 0;  // hand count: m_i = Σ_{j>=i} p_j > τ
    for (int64_t i = 0; i < kDkv; ++i) expect += p[t].narrow(0, i, kDkv - i).sum().item<double>() > 0.3;
    EXPECT_EQ(r[t].item<int64_t>(), expect);
  }
}

class LowRankCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { at::manual_seed(7); }
  AttentionShape shape{kH, kKv, kD, 0};
  std::shared_ptr<const Rope> rope = std::make_shared<Rope>(tiny_config(), at::kCPU);
};

TEST_F(LowRankCacheTest, AdaptiveRanksMatchBruteForceStorageAndAttention) {
  auto kp = random_projection(true, 0), vp = random_projection(true, 0);
  LowRankLayerCache cache(shape, rope, kF64, kp, vp);
  DenseLayerCache dense(shape, rope, kF64);
  std::vector<at::Tensor> ks, vs;
  int64_t pos = 0;
  // Prefill then single-token decodes, as generation does.
  for (int64_t T : {9, 1, 1, 3}) {
    const at::Tensor k = at::randn({kKv, T, kD}, kF64), v = at::randn({kKv, T, kD}, kF64);
    const at::Tensor positions = at::arange(pos, pos + T, at::kLong);
    pos += T;
    cache.append(k, v, positions);
    const auto coeff = [&](const at::Tensor& x, const RankedProjection& p) {
      return x.transpose(0, 1).reshape({T, kDkv}).matmul(p.U);
    };
    const at::Tensor kr = hard_ranks(coeff(k, *kp), kp->W, kp->b, kp->tau);
    const at::Tensor vr = hard_ranks(coeff(v, *vp), vp->W, vp->b, vp->tau);
    dense.append(truncate(k, *kp, kr), truncate(v, *vp, vr), positions);
    const at::Tensor q = at::randn({kH, T, kD}, kF64);
    AttentionProbe probe;
    probe.column_sums = true;
    AttentionStats s1, s2;
    const at::Tensor got = cache.attend(q, positions, probe, &s1);
    const at::Tensor want = dense.attend(q, positions, probe, &s2);
    EXPECT_TRUE(at::allclose(got, want, 1e-9, 1e-9)) << "T=" << T;
    EXPECT_TRUE(at::allclose(s1.column_sums, s2.column_sums, 1e-5, 1e-5));
  }
  const at::Tensor kr = cache.key_ranks(), vr = cache.value_ranks();
  EXPECT_GT(kr.max().item<int64_t>(), kr.min().item<int64_t>()) << "test needs variable ranks";
  const int64_t stored = kr.sum().item<int64_t>() + vr.sum().item<int64_t>();
  EXPECT_EQ(cache.footprint().payload_bytes, stored * 8);
  EXPECT_NEAR(cache.retain_rate(), static_cast<double>(stored) / (2.0 * pos * kDkv), 1e-12);
  EXPECT_LT(cache.footprint().payload_bytes, dense.footprint().payload_bytes);
}

TEST_F(LowRankCacheTest, FullFixedRankIsLosslessAndRetainKeepsSharedTokens) {
  auto kp = random_projection(false, kDkv), vp = random_projection(false, 3);
  LowRankLayerCache cache(shape, rope, kF64, kp, vp);
  const at::Tensor k = at::randn({kKv, 12, kD}, kF64), v = at::randn({kKv, 12, kD}, kF64);
  cache.append(k, v, at::arange(12, at::kLong));
  EXPECT_TRUE(at::allclose(cache.reconstructed_keys(), k, 1e-9, 1e-9));  // rank d_kv: exact
  EXPECT_TRUE(at::allclose(cache.reconstructed_values(), truncate(v, *vp, at::full({12}, 3, at::kLong)), 1e-9, 1e-9));

  const at::Tensor keep = at::tensor(std::vector<int64_t>{0, 4, 5, 11}, at::kLong);
  cache.retain(keep.unsqueeze(0).expand({kKv, 4}));
  EXPECT_EQ(cache.size(), 4);
  EXPECT_TRUE(at::equal(cache.positions(), keep));
  EXPECT_TRUE(at::allclose(cache.reconstructed_keys(), k.index_select(1, keep), 1e-9, 1e-9));
  EXPECT_EQ(cache.footprint().payload_bytes, 4 * (kDkv + 3) * 8);

  const at::Tensor differing = at::tensor(std::vector<int64_t>{0, 1, 0, 2}, at::kLong).view({kKv, 2});
  EXPECT_THROW(cache.retain(differing), kvc::Error);
}

TEST(LowRankCalibration, SecondMomentAndEigenBasis) {
  at::manual_seed(3);
  const at::Tensor x = at::randn({50, 6}, kF64) * at::tensor({3.0, 2.0, 1.0, 0.5, 0.2, 0.1}, kF64);
  SecondMoment m(6);
  m.add(x.narrow(0, 0, 20));
  m.add(x.narrow(0, 20, 30));  // streaming in chunks == all at once
  EXPECT_TRUE(at::allclose(m.matrix(), x.t().matmul(x) / 50.0));
  const EigenBasis e = eigen_basis(m.matrix());
  EXPECT_TRUE((e.eigenvalues.narrow(0, 0, 5) >= e.eigenvalues.narrow(0, 1, 5)).all().item<bool>());
  EXPECT_TRUE(at::allclose(e.eigenvectors.t().matmul(e.eigenvectors), at::eye(6, kF64), 1e-9, 1e-9));
  EXPECT_TRUE(at::allclose(e.eigenvectors.matmul(at::diag(e.eigenvalues)).matmul(e.eigenvectors.t()), m.matrix(),
                           1e-9, 1e-9));
  EXPECT_NEAR(e.explained(6), 1.0, 1e-12);
  EXPECT_NEAR(e.explained(1), e.eigenvalues[0].item<double>() / e.eigenvalues.sum().item<double>(), 1e-12);
}

TEST(LowRankArtifacts, RoundTripAndRefusals) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  const ModelConfig& c = model->config();
  Artifact a;
  a.kind = kGatesKind;
  a.tau = 0.2;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = at::eye(c.kv_dim()), W = at::zeros({c.kv_dim(), c.kv_dim()}), b = at::zeros({c.kv_dim()});
    a.layers.push_back({{U, W, b, {}}, {U, W, b, {}}});
  }
  const std::string dir = test::make_temp_dir("lowrank_art");
  write_artifact(dir + "/gates.safetensors", a, c);
  const Artifact back = load_artifact(dir + "/gates.safetensors", c);
  EXPECT_TRUE(back.is_gates());
  EXPECT_DOUBLE_EQ(back.tau, 0.2);
  EXPECT_TRUE(at::equal(back.layers[2].value.U, a.layers[2].value.U));

  ModelConfig other = c;
  other.config_hash = "0123456789abcdef";
  try {
    load_artifact(dir + "/gates.safetensors", other);
    FAIL() << "foreign artifact accepted";
  } catch (const kvc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
  }
  // Right hash, wrong shapes (a file whose tensors were made for another d_kv).
  Artifact wrong = a;
  for (auto& l : wrong.layers) l.key.U = at::eye(c.kv_dim() - 1);
  write_artifact(dir + "/wrong.safetensors", wrong, c);
  EXPECT_THROW(load_artifact(dir + "/wrong.safetensors", c), kvc::Error);
  // Gates with a fixed rank, bad ranks list, unknown option: one-line errors.
  EXPECT_THROW(make_lowrank_factory(parse_lowrank_spec(dir + "/gates.safetensors", 4), *model), kvc::Error);
  EXPECT_THROW(parse_lowrank_spec(dir + "/gates.safetensors:bogus=1", 0), kvc::Error);
  EXPECT_NO_THROW(make_lowrank_factory(parse_lowrank_spec(dir + "/gates.safetensors:tau=0.5", 0), *model));
}

// A bases file of random orthogonal bases for `model` (at full rank, the dense forward).
std::string write_full_rank_bases(const LlamaModel& model, const std::string& dir_name) {
  const ModelConfig& c = model.config();
  Artifact a;
  a.kind = kBasesKind;
  at::manual_seed(5);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({c.kv_dim(), c.kv_dim()}, kF64))).to(at::kFloat);
    a.layers.push_back({{U, {}, {}, at::ones({c.kv_dim()}, kF64)}, {U, {}, {}, at::ones({c.kv_dim()}, kF64)}});
  }
  const std::string path = test::make_temp_dir(dir_name) + "/bases.safetensors";
  write_artifact(path, a, c);
  return path;
}

TEST(LowRankModel, FullRankBasisReproducesTheDenseForward) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  const ModelConfig& c = model->config();
  const std::string path = write_full_rank_bases(*model, "lowrank_full");
  std::vector<int> ids;
  for (int i = 0; i < 40; ++i) ids.push_back(1 + (i * 37) % 500);
  KVCache dense = model->new_cache();
  KVCache low = model->new_cache(make_lowrank_factory(parse_lowrank_spec(path, c.kv_dim()), *model));
  at::NoGradGuard no_grad;
  const at::Tensor want = model->forward(ids, dense), got = model->forward(ids, low);
  EXPECT_TRUE(at::allclose(got, want, 1e-3, 1e-3)) << (got - want).abs().max().item<double>();
  // Decoding steps too.
  EXPECT_TRUE(at::allclose(model->forward({7}, low), model->forward({7}, dense), 1e-3, 1e-3));
  EXPECT_THROW(make_lowrank_factory(parse_lowrank_spec(path, 0), *model), kvc::Error);  // bases need --rank
  EXPECT_THROW(make_lowrank_factory(parse_lowrank_spec(path, c.kv_dim() + 1), *model), kvc::Error);
}

// The latent holds one token set for all KV heads: presses that keep a different number per head, or
// merge evicted entries into kept rows, are refused when the setup is built, in one line.
TEST(LowRankWithPress, ImpossibleCombinationsFailAtSetup) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  CompressionSpec spec;
  spec.lowrank_file = write_full_rank_bases(*model, "lowrank_press");
  spec.rank = 16;
  spec.ratio = 0.5;
  const auto setup = [&](const std::string& press) {
    spec.press = press;
    return build_cache_setup(spec, *model);
  };
  test::expect_error([&] { setup("d2o"); }, "--press d2o merges evicted entries into kept ones and needs the dense");
  test::expect_error([&] { setup("d2o"); }, "cannot be combined with --lowrank");
  test::expect_error([&] { setup("ada"); }, "--press ada keeps a different number of entries per KV head");
  test::expect_error([&] { setup("kvcompose_unstructured"); }, "cannot be combined with --lowrank");
  EXPECT_NO_THROW(setup("d2o:merge=0"));
  EXPECT_NO_THROW(setup("snapkv:heads=shared"));
  // The capability itself: the low-rank layer says it cannot, naming its layout.
  const auto layer = setup("snapkv:heads=shared").factory(0);
  test::expect_error([&] { layer->retain_per_head({at::arange(2), at::arange(3)}); },
                     "the low-rank cache cannot keep a different number of entries per KV head");
}

}  // namespace
}  // namespace kvc::lowrank
