// Palu's grouped low-rank cache (lowrank/grouped_basis.h) against brute force: the keys and values each
// group of KV heads rebuilds are its own states projected onto the leading directions of a basis
// computed here from scratch — the SVD of the group's rows of W_k / W_v (palu), or the eigenvectors of
// the group's block of the second moment (bases:group=) — with the rank split over the groups in turn;
// the cache holds only the kept coefficients; one group of every head is kvc's plain PCA cache.
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>

#include "cache/dense_layer_cache.h"
#include "lowrank/lowrank_artifacts.h"
#include "lowrank/lowrank_layer_cache.h"
#include "lowrank/lowrank_setup.h"
#include "model/llama_model.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

const auto kF64 = at::TensorOptions().dtype(at::kDouble);

const LlamaModel& stories() {
  static const std::shared_ptr<LlamaModel> model = LlamaModel::load(test::model_dir("stories260K"));
  return *model;
}

// [n_kv, T, d] -> [T, n_kv · d] (heads side by side, as the cache's latent sees them), and back.
at::Tensor flat(const at::Tensor& x) { return x.to(at::kDouble).transpose(0, 1).reshape({x.size(1), -1}); }
at::Tensor heads(const at::Tensor& x, int64_t kv) { return x.reshape({x.size(0), kv, -1}).transpose(0, 1); }

// The brute-force rebuild: group g (of G, each c = d_kv / G dims) keeps the leading r_g columns of
// bases[g], where a total rank R goes to the groups in turn (r_g = R / G, plus one for g < R mod G).
at::Tensor project_groups(const at::Tensor& x, const std::vector<at::Tensor>& bases, int64_t rank) {
  const auto G = static_cast<int64_t>(bases.size());
  const int64_t c = x.size(1) / G;
  at::Tensor out = at::zeros_like(x);
  for (int64_t g = 0; g < G; ++g) {
    const int64_t r = rank / G + (g < rank % G ? 1 : 0);
    const at::Tensor u = bases[static_cast<size_t>(g)].narrow(1, 0, r);
    out.narrow(1, g * c, c).copy_(x.narrow(1, g * c, c).matmul(u).matmul(u.t()));
  }
  return out;
}

// Appends random states to layer `layer`'s cache of `spec`; returns them with the cache.
struct Filled {
  std::unique_ptr<LowRankLayerCache> cache;
  at::Tensor keys, values;  // [n_kv, T, d]
};
Filled fill(const std::string& spec, int64_t rank, int64_t layer, int64_t tokens) {
  const ModelConfig& c = stories().config();
  Filled f{make_lowrank_factory(parse_lowrank_spec(spec, rank), stories())(layer),
           at::randn({c.num_kv_heads, tokens, c.head_dim}), at::randn({c.num_kv_heads, tokens, c.head_dim})};
  f.cache->append(f.keys, f.values, at::arange(tokens, at::kLong));
  return f;
}

TEST(LowRankPalu, WeightGroupsRebuildTheirStatesInTheirOwnSingularVectors) {
  const ModelConfig& c = stories().config();
  const int64_t q = c.num_heads * c.head_dim, d = c.kv_dim(), layer = 2, tokens = 12;
  at::manual_seed(3);
  const at::Tensor w = stories().layer_weights(layer).qkv.dense().to(at::kDouble);
  for (const int64_t group : {1, 2, 4}) {
    for (const int64_t rank : {int64_t{6}, d / 2}) {
      SCOPED_TRACE(::testing::Message() << "group " << group << " rank " << rank);
      const Filled f = fill("palu:group=" + std::to_string(group), rank, layer, tokens);
      const int64_t G = c.num_kv_heads / group, cg = d / G;
      for (const bool keys : {true, false}) {
        std::vector<at::Tensor> bases;
        for (int64_t g = 0; g < G; ++g) {
          const at::Tensor rows = w.narrow(0, q + (keys ? 0 : d) + g * cg, cg);  // the group's outputs
          bases.push_back(std::get<0>(at::linalg_svd(rows, false)));
        }
        const at::Tensor want = heads(project_groups(flat(keys ? f.keys : f.values), bases, rank), c.num_kv_heads);
        const at::Tensor got = keys ? f.cache->reconstructed_keys() : f.cache->reconstructed_values();
        EXPECT_LT((got.to(at::kDouble) - want).abs().max().item<double>(), 1e-4) << (keys ? "keys" : "values");
      }
      // Only the kept coefficients are stored: R per token for each of K and V, float32.
      EXPECT_EQ(f.cache->footprint().payload_bytes, tokens * 2 * rank * 4);
      EXPECT_EQ(f.cache->key_ranks().max().item<int64_t>(), rank);
    }
  }
}

// A random second moment per layer, written as kvc-calibrate writes bases (its eigenpairs, largest first).
std::string write_moment_bases(const std::string& dir, std::vector<at::Tensor>& moments) {
  const ModelConfig& c = stories().config();
  Artifact a;
  a.kind = kBasesKind;
  at::manual_seed(9);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor x = at::randn({4 * c.kv_dim(), c.kv_dim()}, kF64) * at::linspace(0.2, 2.0, c.kv_dim(), kF64);
    const at::Tensor m = x.t().matmul(x) / static_cast<double>(x.size(0));
    moments.push_back(m);
    auto [values, vectors] = at::linalg_eigh(m);
    const Projection p{vectors.flip(1).to(at::kFloat).contiguous(), {}, {}, values.flip(0).contiguous()};
    a.layers.push_back({p, p});
  }
  const std::string path = test::make_temp_dir(dir) + "/bases.safetensors";
  write_artifact(path, a, c);
  return path;
}

TEST(LowRankPalu, CalibrationGroupsTakeTheEigenvectorsOfTheirBlockOfTheMoment) {
  const ModelConfig& c = stories().config();
  std::vector<at::Tensor> moments;
  const std::string path = write_moment_bases("lowrank-palu-moment", moments);
  const int64_t d = c.kv_dim(), layer = 1, rank = 11;
  at::manual_seed(4);
  for (const int64_t group : {1, 2}) {
    SCOPED_TRACE(group);
    const Filled f = fill(path + ":group=" + std::to_string(group), rank, layer, 10);
    const int64_t G = c.num_kv_heads / group, cg = d / G;
    std::vector<at::Tensor> bases;
    for (int64_t g = 0; g < G; ++g) {
      const at::Tensor block = moments[static_cast<size_t>(layer)].narrow(0, g * cg, cg).narrow(1, g * cg, cg);
      bases.push_back(std::get<1>(at::linalg_eigh(block)).flip(1));
    }
    const at::Tensor want = heads(project_groups(flat(f.keys), bases, rank), c.num_kv_heads);
    EXPECT_LT((f.cache->reconstructed_keys().to(at::kDouble) - want).abs().max().item<double>(), 1e-3);
  }
  // One group of every KV head (Palu's J-LRD) is the plain PCA cache.
  at::manual_seed(4);
  const Filled joint = fill(path + ":group=" + std::to_string(c.num_kv_heads), rank, layer, 10);
  at::manual_seed(4);
  const Filled plain = fill(path, rank, layer, 10);
  EXPECT_LT((joint.cache->reconstructed_keys() - plain.cache->reconstructed_keys()).abs().max().item<double>(), 1e-4);
}

// At full rank every group keeps all its directions: the model's forward is the dense one.
TEST(LowRankPalu, FullRankGroupsReproduceTheDenseForward) {
  const ModelConfig& c = stories().config();
  std::vector<int> ids;
  for (int i = 0; i < 30; ++i) ids.push_back(1 + (i * 37) % 500);
  at::NoGradGuard no_grad;
  KVCache dense = stories().new_cache();
  KVCache low = stories().new_cache(make_lowrank_factory(parse_lowrank_spec("palu:group=2", c.kv_dim()), stories()));
  EXPECT_TRUE(at::allclose(stories().forward(ids, low), stories().forward(ids, dense), 1e-3, 1e-3));
  EXPECT_TRUE(at::allclose(stories().forward({7}, low), stories().forward({7}, dense), 1e-3, 1e-3));
}

TEST(LowRankPalu, BadParametersEndInOneLine) {
  const auto build = [](const std::string& spec, int64_t rank) {
    make_lowrank_factory(parse_lowrank_spec(spec, rank), stories());
  };
  test::expect_error([&] { build("palu:group=3", 8); }, "group=3 must divide the model's 4 KV heads");
  test::expect_error([&] { build("palu:group=0", 8); }, "group must be a whole number");
  test::expect_error([&] { build("palu:group=1.5", 8); }, "group must be a whole number");
  test::expect_error([&] { build("palu", 0); }, "give the fixed rank");
  test::expect_error([&] { build("palu:keys=rotated", 8); }, "keys=rotated needs a bases file");
  test::expect_error([&] { build("palu:share=0.5", 0); }, "give a fixed rank");
  std::vector<at::Tensor> moments;
  const std::string path = write_moment_bases("lowrank-palu-errors", moments);
  test::expect_error([&] { build(path + ":group=2,share=0.5", 0); }, "group= and share= do not combine");
  // Without group=, one group of every KV head (J-LRD): the joint SVD of W_k and W_v.
  at::manual_seed(6);
  const Filled joint = fill("palu", 8, 0, 5);
  at::manual_seed(6);
  const Filled all = fill("palu:group=4", 8, 0, 5);
  EXPECT_TRUE(joint.cache->reconstructed_keys().equal(all.cache->reconstructed_keys()));
}

}  // namespace
}  // namespace kvc::lowrank
