// The variable-rank cache against brute force: per-token truncation in the basis, CSR storage,
// attention equal to dense attention over explicitly rebuilt keys/values, retain(), footprint;
// the gate's mask; PCA bases; artifacts refused for another model; presses the shared latent cannot
// serve refused at setup.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "lowrank/covariance.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/lowrank_setup.h"
#include "lowrank/rank_gate.h"
#include "lowrank/rank_search.h"
#include "model/llama_model.h"
#include "support/expect_error.h"
#include "support/lowrank_shapes.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

constexpr int64_t kKv = test::kLowRankKvHeads, kD = test::kLowRankHeadDim, kH = test::kLowRankHeads, kDkv = kKv * kD;
const auto kF64 = at::TensorOptions().dtype(at::kDouble);

ModelConfig tiny_config() { return test::lowrank_test_config(); }

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

// `p` with its gate folded onto the state, as setup folds it.
std::shared_ptr<RankedProjection> folded(const RankedProjection& p) {
  auto f = std::make_shared<RankedProjection>(p);
  f->W = fold_gate(p.U, p.W);
  f->gate_reads_state = true;
  return f;
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
  // Float32 logits (the decode path's) counted the same way on their float64 values.
  const at::Tensor logits = (c.matmul(W) + b).to(at::kFloat);
  const at::Tensor pf = at::softmax(logits.to(at::kDouble), -1);
  const at::Tensor rf = hard_ranks_from_logits(logits, 0.3);
  for (int64_t t = 0; t < 20; ++t) {
    int64_t expect = 0;
    for (int64_t i = 0; i < kDkv; ++i) expect += pf[t].narrow(0, i, kDkv - i).sum().item<double>() > 0.3;
    EXPECT_EQ(rf[t].item<int64_t>(), std::max<int64_t>(expect, 1));
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

// The GPU's layout of a gated store (offsets on the device, reads padded to the widest append, the size
// read back only when the buffer may be full), forced on the CPU: the same ranks, coefficients, attention
// and payload as the host layout, with at most one read back per kRoomTokens appended tokens per store.
TEST_F(LowRankCacheTest, TheDeviceLayoutStoresWhatTheHostLayoutStoresAndRarelyReadsBack) {
  for (const bool fold : {false, true}) {
    auto kp = random_projection(true, 0), vp = random_projection(true, 0);
    std::shared_ptr<const RankedProjection> k_used = kp, v_used = vp;
    if (fold) k_used = folded(*kp), v_used = folded(*vp);
    LowRankLayerCache host(shape, rope, kF64, k_used, v_used);
    LowRankLayerCache device(shape, rope, kF64, k_used, v_used, {}, /*offsets_on_device=*/true);
    int64_t pos = 0;
    const auto step = [&](int64_t T) {
      const at::Tensor k = at::randn({kKv, T, kD}, kF64), v = at::randn({kKv, T, kD}, kF64);
      const at::Tensor positions = at::arange(pos, pos + T, at::kLong);
      pos += T;
      host.append(k, v, positions);
      device.append(k, v, positions);
      const at::Tensor q = at::randn({kH, T, kD}, kF64);
      ASSERT_TRUE(
          at::allclose(device.attend(q, positions, {}, nullptr), host.attend(q, positions, {}, nullptr), 1e-10, 1e-10))
          << "fold=" << fold << " at position " << pos;
    };
    step(40);
    const int64_t reads_after_prefill = device.host_reads();
    const int64_t decode_steps = 150;
    for (int64_t i = 0; i < decode_steps; ++i) step(1);
    // Two stores (K and V), each reading at most once per kRoomTokens tokens.
    const int64_t most = 2 * (decode_steps / LowRankLayerCache::kRoomTokens + 1);
    EXPECT_LE(device.host_reads() - reads_after_prefill, most) << "fold=" << fold;
    EXPECT_GT(device.host_reads() - reads_after_prefill, 0) << "the test should make the store grow";

    const auto same_contents = [&](const std::string& when) {
      EXPECT_TRUE(at::equal(host.key_ranks(), device.key_ranks())) << when;
      EXPECT_TRUE(at::equal(host.value_ranks(), device.value_ranks())) << when;
      EXPECT_TRUE(at::allclose(host.reconstructed_keys(), device.reconstructed_keys(), 1e-12, 1e-12)) << when;
      EXPECT_TRUE(at::allclose(host.reconstructed_values(), device.reconstructed_values(), 1e-12, 1e-12)) << when;
      EXPECT_EQ(host.footprint().payload_bytes, device.footprint().payload_bytes) << when;
      EXPECT_TRUE(at::equal(host.positions(), device.positions())) << when;
    };
    same_contents("after decoding");
    EXPECT_GT(host.key_ranks().max().item<int64_t>(), host.key_ranks().min().item<int64_t>())
        << "test needs variable ranks";
    // Memory stays compressed: the room kept past the coefficients is kRoomTokens tokens at full width.
    const int64_t room = 2 * (LowRankLayerCache::kRoomTokens + 1) * kDkv * 8;
    EXPECT_LE(device.resident_bytes(), host.footprint().payload_bytes * 2 + room + 2 * 16 * pos);
    EXPECT_EQ(device.resident_bytes(), device.footprint().resident_bytes);

    const at::Tensor kept = at::arange(0, pos, 3, at::kLong).unsqueeze(0).expand({kKv, -1}).contiguous();
    host.retain(kept);
    device.retain(kept);
    same_contents("after retain");
    for (int64_t i = 0; i < 20; ++i) step(1);
    same_contents("after decoding past retain");
  }
}

// Setup folds each gate onto the state (fold_gate), so ranks come before the projection and only the
// kept coefficients are computed: the same ranks and coefficients as the gate on the coefficients.
TEST_F(LowRankCacheTest, AFoldedGateStoresTheSameRanksAndCoefficients) {
  auto kp = random_projection(true, 0), vp = random_projection(true, 0);
  LowRankLayerCache plain(shape, rope, kF64, kp, vp), fused(shape, rope, kF64, folded(*kp), folded(*vp));
  int64_t pos = 0;
  for (int64_t T : {9, 1, 1, 3, 1}) {
    const at::Tensor k = at::randn({kKv, T, kD}, kF64), v = at::randn({kKv, T, kD}, kF64);
    const at::Tensor positions = at::arange(pos, pos + T, at::kLong);
    pos += T;
    plain.append(k, v, positions);
    fused.append(k, v, positions);
  }
  EXPECT_TRUE(at::equal(plain.key_ranks(), fused.key_ranks()));
  EXPECT_TRUE(at::equal(plain.value_ranks(), fused.value_ranks()));
  EXPECT_GT(fused.key_ranks().max().item<int64_t>(), fused.key_ranks().min().item<int64_t>())
      << "test needs variable ranks";
  EXPECT_TRUE(at::allclose(plain.reconstructed_keys(), fused.reconstructed_keys(), 1e-10, 1e-10));
  EXPECT_TRUE(at::allclose(plain.reconstructed_values(), fused.reconstructed_values(), 1e-10, 1e-10));
  EXPECT_EQ(plain.footprint().payload_bytes, fused.footprint().payload_bytes);
}

// A decode step reads the payload and, per K/V, the gate matrices, the columns of U the new token is
// projected onto (its rank, or all of them when the gate reads the coefficients) and U^{-1}'s rows up to
// the largest stored rank.
TEST_F(LowRankCacheTest, StepReadBytesCountThePayloadAndTheMatricesAStepMultipliesBy) {
  const int64_t row = kDkv * 8, matrix = kDkv * kDkv * 8;
  const at::Tensor k = at::randn({kKv, 12, kD}, kF64), v = at::randn({kKv, 12, kD}, kF64);
  const at::Tensor positions = at::arange(12, at::kLong);
  const auto ceil_mean = [](const at::Tensor& r) { return (r.sum().item<int64_t>() + r.numel() - 1) / r.numel(); };

  LowRankLayerCache fixed(shape, rope, kF64, random_projection(false, 5), random_projection(false, 3));
  fixed.append(k, v, positions);
  EXPECT_EQ(fixed.footprint().step_read_bytes, fixed.footprint().payload_bytes + (5 + 5) * row + (3 + 3) * row);

  auto kp = random_projection(true, 0), vp = random_projection(true, 0);
  LowRankLayerCache gated(shape, rope, kF64, kp, vp);
  gated.append(k, v, positions);
  const at::Tensor kr = gated.key_ranks(), vr = gated.value_ranks();
  ASSERT_GT(kr.max().item<int64_t>(), kr.min().item<int64_t>()) << "test needs variable ranks";
  EXPECT_EQ(gated.footprint().step_read_bytes, gated.footprint().payload_bytes + 2 * matrix +
                                                   (kDkv + kr.max().item<int64_t>()) * row +
                                                   (kDkv + vr.max().item<int64_t>()) * row);

  LowRankLayerCache fused(shape, rope, kF64, folded(*kp), folded(*vp));
  fused.append(k, v, positions);
  EXPECT_EQ(fused.footprint().step_read_bytes, fused.footprint().payload_bytes + 2 * matrix +
                                                   (ceil_mean(kr) + kr.max().item<int64_t>()) * row +
                                                   (ceil_mean(vr) + vr.max().item<int64_t>()) * row);

  DenseLayerCache dense(shape, rope, kF64);
  dense.append(k, v, positions);
  EXPECT_EQ(dense.footprint().step_read_bytes, dense.footprint().payload_bytes);
  EXPECT_EQ(dense.footprint().payload_bytes, 2 * 12 * kDkv * 8);
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

// --cache-type-k/-v f16 / bf16: the coefficients are stored rounded to that type (brute force: x U,
// rounded, first r_t kept, mapped back), with each gated token's rank still chosen from the exact
// coefficients; the payload counts the stored type's bytes, and attention reads what was stored.
TEST_F(LowRankCacheTest, CoefficientsAreStoredInTheCacheType) {
  for (const auto& [kt, vt] : {std::pair{at::kHalf, at::kHalf}, std::pair{at::kBFloat16, at::kDouble}}) {
    auto kp = random_projection(true, 0), vp = random_projection(false, 5);
    LowRankLayerCache typed(shape, rope, kF64, kp, vp, CacheTypes{kt, vt});
    DenseLayerCache dense(shape, rope, kF64);
    const at::Tensor k = at::randn({kKv, 11, kD}, kF64), v = at::randn({kKv, 11, kD}, kF64);
    const at::Tensor positions = at::arange(11, at::kLong);
    typed.append(k, v, positions);
    const auto rounded = [&](const at::Tensor& x, const RankedProjection& p, at::ScalarType t, const at::Tensor& r) {
      const at::Tensor c = x.transpose(0, 1).reshape({11, kDkv}).matmul(p.U).to(t).to(at::kDouble);
      const at::Tensor keep = at::arange(kDkv, at::kLong).unsqueeze(0) < r.unsqueeze(1);
      return (c * keep.to(at::kDouble)).matmul(p.U_inv).view({11, kKv, kD}).transpose(0, 1);
    };
    const at::Tensor kr = hard_ranks(k.transpose(0, 1).reshape({11, kDkv}).matmul(kp->U), kp->W, kp->b, kp->tau);
    const at::Tensor vr = at::full({11}, 5, at::kLong);
    const at::Tensor k_want = rounded(k, *kp, kt, kr), v_want = rounded(v, *vp, vt, vr);
    EXPECT_TRUE(at::allclose(typed.reconstructed_keys(), k_want, 1e-12, 1e-12)) << c10::toString(kt);
    EXPECT_TRUE(at::allclose(typed.reconstructed_values(), v_want, 1e-12, 1e-12)) << c10::toString(vt);
    EXPECT_FALSE(at::allclose(typed.reconstructed_keys(), truncate(k, *kp, kr), 1e-9, 1e-9)) << "no rounding seen";
    dense.append(k_want, v_want, positions);
    const at::Tensor q = at::randn({kH, 11, kD}, kF64);
    EXPECT_TRUE(
        at::allclose(typed.attend(q, positions, {}, nullptr), dense.attend(q, positions, {}, nullptr), 1e-9, 1e-9));
    const int64_t bytes = kr.sum().item<int64_t>() * static_cast<int64_t>(c10::elementSize(kt)) +
                          vr.sum().item<int64_t>() * static_cast<int64_t>(c10::elementSize(vt));
    EXPECT_EQ(typed.footprint().payload_bytes, bytes);
    // retain() keeps the stored type.
    const at::Tensor keep = at::tensor(std::vector<int64_t>{1, 2, 7}, at::kLong);
    typed.retain(keep.unsqueeze(0).expand({kKv, 3}));
    EXPECT_TRUE(at::allclose(typed.reconstructed_keys(), k_want.index_select(1, keep), 1e-12, 1e-12));
  }
  // Blocks of 32 values cannot hold a row whose length changes per token.
  auto p = random_projection(false, 3);
  EXPECT_THROW(LowRankLayerCache(shape, rope, kF64, p, p, CacheTypes{kCacheQ8_0, at::kHalf}), kvc::Error);
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
  EXPECT_TRUE(
      at::allclose(e.eigenvectors.matmul(at::diag(e.eigenvalues)).matmul(e.eigenvectors.t()), m.matrix(), 1e-9, 1e-9));
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

// Whether a token's soft mask (from float64 logits) passes within `eps` of τ: there a rounding of the
// gate may move its rank by one, and no rank is owed.
bool near_threshold(const at::Tensor& logits_row, double tau, double eps) {
  const at::Tensor mask = at::softmax(logits_row, -1).flip(-1).cumsum(-1).flip(-1);
  return (mask - tau).abs().min().item<double>() < eps;
}

// gate=f16 rounds the gate's matrix to f16, which the CPU then reads in f16: every token's rank, of a
// prefill and of single decode rows, is the one the rounded matrix gives in float64, and a step reads
// half the gate's bytes.
TEST(LowRankModel, A16BitGateRanksTokensAsItsRoundedMatrixDoes) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  const ModelConfig& c = model->config();
  const AttentionShape s = c.attention_shape();
  const int64_t d = c.kv_dim();
  Artifact a;
  a.kind = kGatesKind;
  a.tau = 0.3;
  at::manual_seed(11);
  const auto random_gate = [&] {
    const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({d, d}, kF64))).to(at::kFloat);
    return Projection{U, at::randn({d, d}), at::randn({d}), {}};
  };
  for (int64_t l = 0; l < c.num_layers; ++l) a.layers.push_back({random_gate(), random_gate()});
  const std::string path = test::make_temp_dir("lowrank_half_gate") + "/gates.safetensors";
  write_artifact(path, a, c);

  auto cache = make_lowrank_factory(parse_lowrank_spec(path + ":gate=f16", 0), *model)(1);
  std::vector<at::Tensor> keys, values;
  int64_t pos = 0;
  for (int64_t T : {40, 1, 1, 1}) {
    keys.push_back(at::randn({s.num_kv_heads, T, s.head_dim}));
    values.push_back(at::randn({s.num_kv_heads, T, s.head_dim}));
    cache->append(keys.back(), values.back(), at::arange(pos, pos + T, at::kLong));
    pos += T;
  }
  int64_t checked = 0;
  const auto expect_ranks = [&](const std::vector<at::Tensor>& states, const Projection& p, const at::Tensor& got) {
    const at::Tensor x = at::cat(states, 1).transpose(0, 1).reshape({pos, d}).to(at::kDouble);
    const at::Tensor rounded = fold_gate(p.U, p.W).to(at::kHalf).to(at::kDouble);
    const at::Tensor logits = x.matmul(rounded) + p.b.to(at::kDouble);
    const at::Tensor want = hard_ranks_from_logits(logits, a.tau);
    ASSERT_EQ(got.numel(), pos);
    ASSERT_GT(want.max().item<int64_t>(), want.min().item<int64_t>()) << "test needs variable ranks";
    for (int64_t t = 0; t < pos; ++t) {
      if (near_threshold(logits[t], a.tau, 1e-5)) continue;
      EXPECT_EQ(got[t].item<int64_t>(), want[t].item<int64_t>()) << "token " << t;
      ++checked;
    }
  };
  expect_ranks(keys, a.layers[1].key, cache->key_ranks());
  expect_ranks(values, a.layers[1].value, cache->value_ranks());
  EXPECT_GT(checked, 2 * pos - 4) << "too many tokens at the threshold to test";

  // The step reads the payload, each gate in f16, and the rows of U and U^{-1} as for an f32 gate.
  const int64_t row = d * 4;
  const auto rows = [&](const at::Tensor& r) {
    return (r.sum().item<int64_t>() + r.numel() - 1) / r.numel() + r.max().item<int64_t>();
  };
  EXPECT_EQ(cache->footprint().step_read_bytes, cache->footprint().payload_bytes + 2 * d * d * 2 +
                                                    (rows(cache->key_ranks()) + rows(cache->value_ranks())) * row);

  test::expect_error([&] { parse_lowrank_spec(path + ":gate=f8", 0); }, "gate must be f32 (the default) or f16");
  Artifact huge = a;
  for (LayerBasis& layer : huge.layers) layer.value.W = layer.value.W * 1e5;
  const std::string huge_path = test::make_temp_dir("lowrank_huge_gate") + "/gates.safetensors";
  write_artifact(huge_path, huge, c);
  EXPECT_NO_THROW(make_lowrank_factory(parse_lowrank_spec(huge_path, 0), *model));
  test::expect_error([&] { make_lowrank_factory(parse_lowrank_spec(huge_path + ":gate=f16", 0), *model); },
                     "beyond f16's range");
  const std::string bases = write_full_rank_bases(*model, "lowrank_half_gate_bases");
  test::expect_error([&] { make_lowrank_factory(parse_lowrank_spec(bases + ":gate=f16", 4), *model); },
                     "gate=f16 applies to trained gates");
}

// Rank search: the greedy allocation reaches the best objective of every allocation within the budget
// (brute force over all of them), spends the budget exactly, and keeps one direction per matrix.
TEST(LowRankRankSearch, GreedyAllocationIsTheBestWithinTheBudget) {
  at::manual_seed(11);
  constexpr int64_t d = 4, L = 3;
  Artifact a;
  a.kind = kBasesKind;
  for (int64_t l = 0; l < L; ++l) {
    const auto spectrum = [] { return std::get<0>(at::sort(at::rand({d}, kF64).pow(3), 0, true)); };
    a.layers.push_back({{{}, {}, {}, spectrum()}, {{}, {}, {}, spectrum()}});
  }
  const auto explained = [&](int64_t l, bool key, int64_t r) {
    const at::Tensor e = key ? a.layers[l].key.eigenvalues : a.layers[l].value.eigenvalues;
    return e.narrow(0, 0, r).sum().item<double>() / e.sum().item<double>();
  };
  const std::vector<int64_t> layers = {0, 2};  // layer 1 stands for a sliding-window layer: not searched
  for (const double share : {0.25, 0.4, 0.6, 1.0}) {
    const RankAllocation got = search_ranks(a, layers, share);
    const auto budget = static_cast<int64_t>(std::floor(share * 2 * 2 * d + 1e-9));
    EXPECT_EQ(got.coefficients, budget) << share;
    EXPECT_EQ(got.keys[1] + got.values[1], 0);
    double best = 0;
    for (int64_t code = 0; code < d * d * d * d; ++code) {  // ranks 1..d of the four matrices
      int64_t c = code, used = 0;
      double value = 0;
      for (int m = 0; m < 4; ++m, c /= d) {
        used += c % d + 1;
        value += explained(layers[m / 2], m % 2 == 0, c % d + 1);
      }
      if (used <= budget) best = std::max(best, value);
    }
    double mine = 0;
    for (const int64_t l : layers) {
      EXPECT_GE(got.keys[l], 1);
      EXPECT_GE(got.values[l], 1);
      mine += explained(l, true, got.keys[l]) + explained(l, false, got.values[l]);
    }
    EXPECT_NEAR(mine, best, 1e-12) << share;
    EXPECT_NEAR(got.explained, best, 1e-12) << share;
  }
  test::expect_error([&] { search_ranks(a, layers, 0.2); },
                     "fewer than one direction for the keys and one for the "
                     "values of each of the 2 layers; use share >= 0.25");
  test::expect_error([&] { search_ranks(a, layers, 1.5); }, "share must be in (0, 1]");
}

// --lowrank bases:share=S on a model: the cache holds exactly the searched coefficients, which never
// exceed S of the full cache; share= refuses --rank and gates.
TEST(LowRankRankSearch, SearchedRanksHoldTheirShareOfTheCache) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  const ModelConfig& c = model->config();
  const std::string path = test::make_temp_dir("lowrank-share") + "/bases.safetensors";
  Artifact a;
  a.kind = kBasesKind;
  at::manual_seed(5);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = std::get<0>(at::linalg_qr(at::randn({c.kv_dim(), c.kv_dim()}, kF64))).to(at::kFloat);
    const auto spectrum = [&] { return std::get<0>(at::sort(at::rand({c.kv_dim()}, kF64), 0, true)); };
    a.layers.push_back({{U, {}, {}, spectrum()}, {U, {}, {}, spectrum()}});
  }
  write_artifact(path, a, c);
  std::vector<int> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(1 + (i * 37) % 500);
  at::NoGradGuard no_grad;
  KVCache dense = model->new_cache();
  model->forward(ids, dense);
  for (const double share : {0.2, 0.5}) {
    KVCache low =
        model->new_cache(make_lowrank_factory(parse_lowrank_spec(path + ":share=" + std::to_string(share), 0), *model));
    model->forward(ids, low);
    const double kept =
        static_cast<double>(low.footprint().payload_bytes) / static_cast<double>(dense.footprint().payload_bytes);
    const RankAllocation r = search_ranks(load_artifact(path, c), lowrank_layers(c), share);
    EXPECT_NEAR(kept, static_cast<double>(r.coefficients) / static_cast<double>(2 * c.num_layers * c.kv_dim()), 1e-12);
    EXPECT_LE(kept, share);
    EXPECT_GT(kept, share - 1.0 / static_cast<double>(c.kv_dim()));
  }
  test::expect_error([&] { parse_lowrank_spec(path + ":share=0.5", 4); }, "share= searches the ranks itself");
  test::expect_error([&] { parse_lowrank_spec(path + ":share=0", 0); }, "share must be in (0, 1]");
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
  const auto layer = setup("snapkv:heads=shared").layout()(0);
  EXPECT_EQ(layer->per_head_layout(), nullptr);
  KVCache cache = [&] {
    std::vector<std::unique_ptr<LayerCache>> layers;
    layers.push_back(setup("snapkv:heads=shared").layout()(0));
    return KVCache(std::move(layers));
  }();
  test::expect_error(
      [&] {
        cache.retain_per_head(0, {at::arange(2), at::arange(3)});
      },
      "the low-rank cache cannot keep a different number of entries per KV head");
}

}  // namespace
}  // namespace kvc::lowrank
