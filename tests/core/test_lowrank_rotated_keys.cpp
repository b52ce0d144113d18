// Keys in a rotated basis (--lowrank ...:keys=rotated) and the CSR kernels a decode step reads the
// coefficients with: the kernels against padded matrix products, the rotated-key cache against dense
// attention over brute-force truncated rotated keys (prefill and decode paths), the calibrated rotated
// basis against the second moment of RoPE-rotated keys collected by hand, and the refusals.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cache/dense_layer_cache.h"
#include "kernels/csr_latent.h"
#include "lowrank/calibration.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/lowrank_setup.h"
#include "lowrank/rank_gate.h"
#include "model/llama_model.h"
#include "support/lowrank_shapes.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

// How a random CSR buffer's ranks spread: random in 0..r_max (some zero, some full); skewed: in 0..8 but
// every 37th token at r_max, as adaptive ranks spread (a few wide tokens in tiles of narrow ones); or all
// r_max, a fixed rank.
enum class Ranks { kRandom, kSkewed, kFixed };

// Ranks as CSR offsets, and a flat buffer of that many values.
struct RandomCsr {
  std::vector<int64_t> offsets{0};
  at::Tensor flat;
  at::Tensor padded;  // [count, r_max] float64 with zeros after each token's rank
};

RandomCsr random_csr(int64_t count, int64_t r_max, at::ScalarType stored, Ranks spread = Ranks::kRandom) {
  RandomCsr c;
  const bool skewed = spread == Ranks::kSkewed;
  at::Tensor ranks = at::full({count}, r_max, at::kLong);
  if (spread != Ranks::kFixed) {
    ranks = at::randint(0, skewed ? std::min<int64_t>(r_max, 8) + 1 : r_max + 1, {count}, at::kLong);
    if (skewed) ranks.slice(0, 0, count, 37).fill_(r_max);
    ranks[0] = r_max;
    ranks[count - 1] = 0;
  }
  for (int64_t t = 0; t < count; ++t) c.offsets.push_back(c.offsets.back() + ranks[t].item<int64_t>());
  c.flat = at::randn({c.offsets.back()}, kF64).to(stored);
  c.padded = at::zeros({count, r_max}, kF64);
  const at::Tensor wide = c.flat.to(at::kDouble);
  for (int64_t t = 0; t < count; ++t) {
    const int64_t r = c.offsets[t + 1] - c.offsets[t];
    c.padded[t].narrow(0, 0, r).copy_(wide.narrow(0, c.offsets[t], r));
  }
  return c;
}

TEST(CsrLatent, KernelsMatchPaddedProducts) {
  at::manual_seed(11);
  for (const at::ScalarType stored : {at::kFloat, at::kHalf, at::kBFloat16}) {
    for (const at::ScalarType compute : {at::kFloat, at::kDouble}) {
      // Fixed ranks 32 and 48 are read in place (the last tile of 150 or 131 tokens only when weighing:
      // scoring widens a tile that ends in a part group of four); 24 only when scoring; 20 never.
      for (const auto& [count, R, r_max, spread] :
           {std::tuple<int64_t, int64_t, int64_t, Ranks>{150, 12, 37, Ranks::kRandom},
            {3, 1, 5, Ranks::kRandom},
            {130, 13, 16, Ranks::kRandom},
            {64, 3, 1, Ranks::kRandom},
            {300, 12, 200, Ranks::kSkewed},
            {131, 5, 77, Ranks::kSkewed},
            {150, 12, 32, Ranks::kFixed},
            {131, 5, 48, Ranks::kFixed},
            {128, 3, 24, Ranks::kFixed},
            {70, 4, 20, Ranks::kFixed}}) {
        const RandomCsr c = random_csr(count, r_max, stored, spread);
        const CsrCoefficients csr{c.flat, c.offsets.data(), count};
        const at::Tensor rows = at::randn({R, r_max}, kF64);
        const at::Tensor probs = at::rand({R, count}, kF64);
        const double tol = compute == at::kFloat ? 1e-4 : 1e-10;
        const at::Tensor scores = csr_latent_scores(csr, rows.to(compute));
        EXPECT_TRUE(at::allclose(scores.to(at::kDouble), rows.matmul(c.padded.t()), tol, tol))
            << c10::toString(stored) << " " << c10::toString(compute) << " count " << count << " R " << R;
        const at::Tensor weighed = csr_latent_weigh(csr, probs.to(compute), r_max);
        EXPECT_TRUE(at::allclose(weighed.to(at::kDouble), probs.matmul(c.padded), tol, tol))
            << c10::toString(stored) << " " << c10::toString(compute) << " count " << count << " R " << R;
      }
    }
  }
  // Suffixes of the buffer (the tokens a block of a decode step reads) start at their own offsets.
  const RandomCsr c = random_csr(100, 9, at::kFloat);
  const at::Tensor rows = at::randn({4, 9}, kF64);
  const at::Tensor tail = csr_latent_scores({c.flat, c.offsets.data() + 40, 60}, rows.to(at::kFloat));
  EXPECT_TRUE(at::allclose(tail.to(at::kDouble), rows.matmul(c.padded.narrow(0, 40, 60).t()), 1e-4, 1e-4));
}

// The kernels read a fixed rank's coefficients where they lie (16 and 32 here) and copy others (13): with
// the buffer ending at a page that may not be read, a load past the last coefficient would crash.
TEST(CsrLatent, ReadsNothingPastTheLastCoefficient) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* mapped = mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  ASSERT_EQ(mprotect(static_cast<char*>(mapped) + page, page, PROT_NONE), 0);
  at::manual_seed(5);
  for (const auto& [count, rank] : {std::pair<int64_t, int64_t>{8, 16}, {8, 32}, {9, 13}}) {
    const RandomCsr c = random_csr(count, rank, at::kFloat, Ranks::kFixed);
    const int64_t total = c.offsets.back();
    float* flat = reinterpret_cast<float*>(static_cast<char*>(mapped) + page) - total;
    std::copy(c.flat.data_ptr<float>(), c.flat.data_ptr<float>() + total, flat);
    const CsrCoefficients csr{at::from_blob(flat, {total}, at::kFloat), c.offsets.data(), count};
    const at::Tensor rows = at::randn({5, rank}, kF64), probs = at::rand({5, count}, kF64);
    EXPECT_TRUE(at::allclose(csr_latent_scores(csr, rows.to(at::kFloat)).to(at::kDouble), rows.matmul(c.padded.t()),
                             1e-4, 1e-4));
    EXPECT_TRUE(at::allclose(csr_latent_weigh(csr, probs.to(at::kFloat), rank).to(at::kDouble), probs.matmul(c.padded),
                             1e-4, 1e-4));
  }
  munmap(mapped, 2 * page);
}

constexpr int64_t kKv = test::kLowRankKvHeads, kD = test::kLowRankHeadDim, kH = test::kLowRankHeads, kDkv = kKv * kD;

ModelConfig tiny_config() { return test::lowrank_test_config(); }

// A basis of rotated keys (non-orthogonal, so U^{-1} != Uᵀ is exercised); gated: the gate reads the
// coefficients of the pre-RoPE key in another basis.
std::shared_ptr<RankedProjection> rotated_projection(bool gated, int64_t rank, at::ScalarType dtype) {
  auto p = std::make_shared<RankedProjection>();
  p->U = (at::eye(kDkv, kF64) + 0.3 * at::randn({kDkv, kDkv}, kF64)).to(dtype);
  p->U_inv = at::linalg_inv(p->U.to(at::kDouble)).to(dtype);
  p->rotated = true;
  if (gated) {
    p->gate_U = (at::eye(kDkv, kF64) + 0.3 * at::randn({kDkv, kDkv}, kF64)).to(dtype);
    p->W = at::randn({kDkv, kDkv}, kF64).to(dtype);
    p->b = at::randn({kDkv}, kF64).to(dtype);
    p->tau = 0.3;
  }
  p->fixed_rank = rank;
  return p;
}

std::shared_ptr<RankedProjection> value_projection(int64_t rank, at::ScalarType dtype) {
  auto p = std::make_shared<RankedProjection>();
  p->U = (at::eye(kDkv, kF64) + 0.3 * at::randn({kDkv, kDkv}, kF64)).to(dtype);
  p->U_inv = at::linalg_inv(p->U.to(at::kDouble)).to(dtype);
  p->fixed_rank = rank;
  return p;
}

at::Tensor flat(const at::Tensor& heads) { return heads.transpose(0, 1).reshape({heads.size(1), kDkv}); }
at::Tensor heads(const at::Tensor& flat_rows) { return flat_rows.view({flat_rows.size(0), kKv, kD}).transpose(0, 1); }

// Brute force in float64: coefficients of `rows` in U, each token's first r kept, mapped back.
at::Tensor truncated(const at::Tensor& rows, const RankedProjection& p, const at::Tensor& ranks) {
  const at::Tensor keep = (at::arange(kDkv, at::kLong).unsqueeze(0) < ranks.unsqueeze(1)).to(at::kDouble);
  return (rows.matmul(p.U.to(at::kDouble)) * keep).matmul(p.U_inv.to(at::kDouble));
}

TEST(LowRankRotatedKeys, AttentionMatchesDenseAttentionOverTruncatedRotatedKeys) {
  const AttentionShape shape{kH, kKv, kD, 0};
  // folded: the gate on the pre-RoPE basis folded onto the state, as setup prepares it.
  for (const at::ScalarType dtype : {at::kDouble, at::kFloat}) {
    for (const auto& [gated, folded] : {std::pair{true, false}, {true, true}, {false, false}}) {
      at::manual_seed(gated ? 3 : 4);
      const auto opts = at::TensorOptions().dtype(dtype);
      const auto rope = std::make_shared<Rope>(tiny_config(), at::kCPU);
      auto kp = rotated_projection(gated, gated ? 0 : 3, dtype);
      auto vp = value_projection(5, dtype);
      auto used = std::make_shared<RankedProjection>(*kp);
      if (folded) {
        used->W = fold_gate(kp->gate_U, kp->W);
        used->gate_U = at::Tensor();
        used->gate_reads_state = true;
      }
      LowRankLayerCache cache(shape, rope, opts, used, vp);
      DenseLayerCache dense(shape, rope, kF64);
      const double tol = dtype == at::kFloat ? 1e-4 : 1e-9;
      int64_t pos = 0;
      // A prefill, single-token decodes (the CSR kernels) and a short chunk.
      for (int64_t T : {9, 1, 1, 3, 1}) {
        const at::Tensor k = at::randn({kKv, T, kD}, kF64), v = at::randn({kKv, T, kD}, kF64);
        const at::Tensor positions = at::arange(pos, pos + T, at::kLong);
        pos += T;
        cache.append(k.to(dtype), v.to(dtype), positions);
        const at::Tensor key_ranks = gated ? hard_ranks(flat(k).matmul(kp->gate_U.to(at::kDouble)),
                                                        kp->W.to(at::kDouble), kp->b.to(at::kDouble), kp->tau)
                                           : at::full({T}, 3, at::kLong);
        const at::Tensor rotated_keys = truncated(flat(rope->apply(k, positions)), *kp, key_ranks);
        // The dense cache rotates what it is given: hand it the truncated keys rotated back.
        dense.append(rope->unapply(heads(rotated_keys), positions),
                     heads(truncated(flat(v), *vp, at::full({T}, 5, at::kLong))), positions);
        const at::Tensor q = at::randn({kH, T, kD}, kF64);
        const at::Tensor got = cache.attend(q.to(dtype), positions, {}, nullptr).to(at::kDouble);
        const at::Tensor want = dense.attend(q, positions, {}, nullptr);
        EXPECT_TRUE(at::allclose(got, want, tol, tol))
            << c10::toString(dtype) << " gated " << gated << " folded " << folded << " T=" << T << " diff "
            << (got - want).abs().max().item<double>();
      }
      if (gated) {
        const at::Tensor r = cache.key_ranks();
        EXPECT_GT(r.max().item<int64_t>(), r.min().item<int64_t>()) << "test needs variable ranks";
      }
    }
  }
}

TEST(LowRankRotatedKeys, FullRankGivesBackThePreRopeKeys) {
  at::manual_seed(9);
  const AttentionShape shape{kH, kKv, kD, 0};
  const auto rope = std::make_shared<Rope>(tiny_config(), at::kCPU);
  LowRankLayerCache cache(shape, rope, kF64, rotated_projection(false, kDkv, at::kDouble),
                          value_projection(kDkv, at::kDouble));
  const at::Tensor k = at::randn({kKv, 10, kD}, kF64);
  cache.append(k, at::randn({kKv, 10, kD}, kF64), at::arange(3, 13, at::kLong));
  EXPECT_TRUE(at::allclose(cache.reconstructed_keys(), k, 1e-9, 1e-9));
}

// Sees layer 0's keys of one window, rotated at their positions.
class RotatedKeyCollector : public ForwardObserver {
 public:
  explicit RotatedKeyCollector(std::shared_ptr<const Rope> rope) : rope_(std::move(rope)) {}
  void after_attention(const LayerStep& step, KVCache&) override {
    if (step.layer == 0) rows.push_back(flat_all(rope_->apply(step.keys, step.positions)));
  }
  static at::Tensor flat_all(const at::Tensor& h) { return h.transpose(0, 1).reshape({h.size(1), -1}); }
  std::vector<at::Tensor> rows;

 private:
  std::shared_ptr<const Rope> rope_;
};

TEST(LowRankRotatedKeys, CalibrationBasisIsThePcaOfRotatedKeys) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  std::vector<int> ids;
  for (int i = 0; i < 48; ++i) ids.push_back(1 + (i * 37) % 500);
  CalibrationOptions options;
  options.tokens = 48;
  options.seq_len = 48;
  options.show_progress = false;
  const CalibrationResult result = calibrate(*model, ids, options);

  RotatedKeyCollector collector(model->rope());
  ForwardOptions fo;
  fo.observer = &collector;
  KVCache cache = model->new_cache();
  at::NoGradGuard no_grad;
  model->forward(ids, cache, fo);
  const at::Tensor x = at::cat(collector.rows, 0).to(at::kDouble);
  const at::Tensor moment = x.t().matmul(x) / static_cast<double>(x.size(0));
  const EigenBasis& e = result.rotated_keys[0];
  EXPECT_TRUE(
      at::allclose(e.eigenvectors.matmul(at::diag(e.eigenvalues)).matmul(e.eigenvectors.t()), moment, 1e-6, 1e-6));
  for (size_t l = 0; l < result.keys.size(); ++l) {
    // RoPE preserves each key's norm, so both bases share their trace, but not their directions.
    EXPECT_NEAR(result.rotated_keys[l].eigenvalues.sum().item<double>(),
                result.keys[l].eigenvalues.sum().item<double>(),
                1e-6 * result.keys[l].eigenvalues.sum().item<double>());
    EXPECT_FALSE(at::allclose(result.rotated_keys[l].eigenvalues, result.keys[l].eigenvalues, 1e-3, 1e-3)) << l;
  }

  // The artifact carries it, and keys=rotated at full rank is the dense forward.
  const std::string path = test::make_temp_dir("lowrank_rotated") + "/bases.safetensors";
  write_artifact(path, bases_artifact(result), model->config());
  const int64_t dkv = model->config().kv_dim();
  KVCache dense = model->new_cache();
  KVCache low = model->new_cache(make_lowrank_factory(parse_lowrank_spec(path + ":keys=rotated", dkv), *model));
  const at::Tensor want = model->forward(ids, dense), got = model->forward(ids, low);
  EXPECT_TRUE(at::allclose(got, want, 1e-3, 1e-3)) << (got - want).abs().max().item<double>();
  EXPECT_TRUE(at::allclose(model->forward({7}, low), model->forward({7}, dense), 1e-3, 1e-3));
}

TEST(LowRankRotatedKeys, RefusedWithoutARotatedBasisOrWithAnUnknownForm) {
  auto model = LlamaModel::load(test::model_dir("stories260K"));
  const ModelConfig& c = model->config();
  Artifact a;
  a.kind = kBasesKind;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor U = at::eye(c.kv_dim()), ev = at::ones({c.kv_dim()}, kF64);
    a.layers.push_back({{U, {}, {}, ev}, {U, {}, {}, ev}, {}});
  }
  const std::string path = test::make_temp_dir("lowrank_no_rotated") + "/bases.safetensors";
  write_artifact(path, a, c);
  EXPECT_NO_THROW(make_lowrank_factory(parse_lowrank_spec(path, 4), *model));
  try {
    make_lowrank_factory(parse_lowrank_spec(path + ":keys=rotated", 4), *model);
    FAIL() << "keys=rotated accepted without a rotated basis";
  } catch (const kvc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no basis of rotated keys"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_lowrank_spec(path + ":keys=sideways", 4), kvc::Error);
}

}  // namespace
}  // namespace kvc::lowrank
