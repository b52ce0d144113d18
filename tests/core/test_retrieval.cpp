// The retrieval layer cache against the dense cache: with every cluster retrieved it must be exact,
// every strategy must keep each entry in exactly one place, and with one cluster retrieved the
// output and the measured recall must match a brute-force computation over that cluster.
#include <gtest/gtest.h>

#include <limits>
#include <map>

#include "cache/dense_layer_cache.h"
#include "model/llama_model.h"
#include "retrieval/host_transfer.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/expect_error.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc::retrieval {
namespace {

struct Fixture {
  std::shared_ptr<LlamaModel> model = LlamaModel::load(test::model_dir("stories260K"));
  AttentionShape shape{model->config().num_heads, model->config().num_kv_heads, model->config().head_dim, 0};
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

std::shared_ptr<RetrievalShared> make_shared(const std::string& spec) {
  return make_retrieval_shared(RetrievalConfig::parse(spec), RecordFormat{fixture().shape.head_dim},
                               test::make_temp_dir("kvc-ret") + "/store.kvs", true);
}

// Every entry ends up in exactly one cluster (on storage or in a RAM buffer) or the local pending list.
void expect_each_entry_once(RetrievalLayerCache& layer, RetrievalShared& shared, int64_t entries) {
  for (size_t h = 0; h < layer.heads().size(); ++h) {
    std::map<int64_t, int> seen;
    for (const auto& c : layer.heads()[h].clusters()) {
      const std::vector<EntryBlock> read = shared.store->read({c.uid});
      for (int64_t p : read.front().positions) seen[p] += 1;
      for (int64_t p : c.delayed.positions) seen[p] += 1;
      EXPECT_EQ(c.stats.n, shared.store->entries(c.uid) + c.delayed.size()) << "cluster size out of sync";
    }
    for (int64_t p : layer.heads()[h].pending().positions) seen[p] += 1;
    std::string missing;
    for (int64_t p = 0; p < entries; ++p)
      if (!seen.count(p)) missing += std::to_string(p) + " ";
    ASSERT_EQ(static_cast<int64_t>(seen.size()), entries) << "head " << h << ", missing: " << missing;
    for (const auto& [p, n] : seen) ASSERT_EQ(n, 1) << "position " << p;
  }
}

class AllRetrieved : public ::testing::TestWithParam<std::string> {};

TEST_P(AllRetrieved, MatchesDenseAttention) {
  at::manual_seed(0);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 40;
  auto shared = make_shared(GetParam());
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  DenseLayerCache dense(f.shape, f.model->rope(), at::TensorOptions().dtype(at::kFloat));
  const auto step = [&](int64_t t0, int64_t n) {
    const at::Tensor k = at::randn({KV, n, d}) * 2, v = at::randn({KV, n, d}), q = at::randn({H, n, d}) * 2;
    const at::Tensor pos = at::arange(t0, t0 + n, at::kLong);
    layer.append(k, v, pos);
    dense.append(k, v, pos);
    const at::Tensor a = layer.attend(q, pos, {}, nullptr), b = dense.attend(q, pos, {}, nullptr);
    ASSERT_TRUE(at::allclose(a, b, 1e-4, 1e-5)) << "t0=" << t0 << " max diff " << (a - b).abs().max().item<float>();
  };
  step(0, T);
  for (int64_t t = T; t < T + 60; ++t) step(t, 1);
  EXPECT_NEAR(shared->recall_sum / shared->recall_count, 1.0, 1e-5);
  if (!picks_entries(shared->config.strategy)) expect_each_entry_once(layer, *shared, T + 60);
  if (GetParam().rfind("adaptive", 0) == 0) {
    EXPECT_GT(shared->splits, 0) << "τ = 0 must split";
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AllRetrieved,
                         ::testing::Values("adaptive:topk=1000,tau_scale=0,bmax=3",
                                           "adaptive:topk=1000,bmax=0,cache_kb=0", "static:topk=1000,layout=naive",
                                           "local:topk=1000,every=7", "none:budget=100000",
                                           "pq:budget=100000,cache_kb=0"));

// Entries appended twice before an attend (as when a prefill is copied in) are both stored first.
TEST(Retrieval, TwoAppendsBeforeAnAttendAreBothAttended) {
  at::manual_seed(2);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 24;
  auto shared = make_shared("adaptive");
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  DenseLayerCache dense(f.shape, f.model->rope(), at::TensorOptions().dtype(at::kFloat));
  const at::Tensor k = at::randn({KV, 2 * T, d}), v = at::randn({KV, 2 * T, d}), q = at::randn({H, 2 * T, d});
  const at::Tensor pos = at::arange(2 * T, at::kLong);
  for (int64_t part = 0; part < 2; ++part) {
    layer.append(k.narrow(1, part * T, T), v.narrow(1, part * T, T), pos.narrow(0, part * T, T));
    dense.append(k.narrow(1, part * T, T), v.narrow(1, part * T, T), pos.narrow(0, part * T, T));
  }
  EXPECT_EQ(layer.lengths()[0].item<int64_t>(), 2 * T);
  const at::Tensor a = layer.attend(q, pos, {}, nullptr), b = dense.attend(q, pos, {}, nullptr);
  EXPECT_TRUE(at::allclose(a, b, 1e-4, 1e-5)) << (a - b).abs().max().item<float>();
  expect_each_entry_once(layer, *shared, 2 * T);
}

// One copy brings tensors of any type and size back bit for bit (NaN payloads, denormals and -0 too).
TEST(HostTransfer, TensorsComeBackBitForBit) {
  at::manual_seed(4);
  at::Tensor f = at::randn({3, 5, 7});
  f[0][0][0] = std::numeric_limits<float>::quiet_NaN();
  f[0][0][1] = std::numeric_limits<float>::denorm_min();
  f[0][0][2] = -0.0f;
  const at::Tensor bf = at::randn({13}).to(at::kBFloat16);
  const at::Tensor longs = at::tensor({int64_t{1} << 62, int64_t{-3}, int64_t{5}}, at::kLong);
  const at::Tensor bytes = at::tensor({1, 2, 255}, at::kByte);
  const at::Tensor strided = at::randn({6, 4}).t();  // not contiguous
  const std::vector<at::Tensor> parts = {bytes, f, bf, longs, strided, at::randn({2}, at::kDouble)};
  const std::vector<at::Tensor> back = copy_to_host_together(parts);
  ASSERT_EQ(back.size(), parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_EQ(back[i].scalar_type(), parts[i].scalar_type()) << i;
    EXPECT_EQ(back[i].sizes(), parts[i].sizes()) << i;
    EXPECT_TRUE(
        at::equal(back[i].contiguous().view({-1}).view(at::kByte), parts[i].contiguous().view({-1}).view(at::kByte)))
        << i;
  }
}

// RAM held counts the store's write buffers. With tails=storage none after the prompt (its clusters
// went out whole); an append gathers the cluster's last page in RAM and the footprint grows by exactly
// those bytes. With tails=small (the default) the prompt's clusters of one or two entries stay in RAM.
TEST(Retrieval, RamHeldCountsTheStoreWriteBuffers) {
  at::manual_seed(3);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 100;
  {
    auto shared = make_shared("static:cache_kb=0,csize=2");  // clusters of about two entries
    RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
    layer.append(at::randn({KV, T, d}), at::randn({KV, T, d}), at::arange(T, at::kLong));
    layer.attend(at::randn({H, T, d}), at::arange(T, at::kLong), {}, nullptr);  // clusters the prompt
    int64_t small = 0;
    for (const auto& h : layer.heads())
      for (const auto& c : h.clusters())
        if (shared->store->entries(c.uid) <= kSmallClusterEntries) small += shared->store->entries(c.uid);
    EXPECT_GT(small, 0) << "no cluster of one or two entries: the check below tests nothing";
    EXPECT_EQ(shared->store->tail_bytes(), small * RecordFormat{d}.record_bytes());
    EXPECT_GE(layer.footprint().ram_bytes, shared->store->tail_bytes());
  }
  auto shared = make_shared("static:cache_kb=0,tails=storage");
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  layer.append(at::randn({KV, T, d}), at::randn({KV, T, d}), at::arange(T, at::kLong));
  layer.attend(at::randn({H, T, d}), at::arange(T, at::kLong), {}, nullptr);
  EXPECT_EQ(shared->store->tail_bytes(), 0);
  const int64_t before = layer.footprint().ram_bytes;
  const auto& cluster = layer.heads()[0].clusters().front();
  ASSERT_LT(shared->store->entries(cluster.uid) % shared->store->per_page(), shared->store->per_page() - 1);
  std::vector<float> x(static_cast<size_t>(d), 0.5f);
  shared->store->append(cluster.uid, x.data(), x.data(), T);
  const int64_t buffered = shared->store->tail_bytes();
  EXPECT_EQ(buffered,
            (shared->store->entries(cluster.uid) % shared->store->per_page()) * RecordFormat{d}.record_bytes());
  EXPECT_GT(buffered, 0);
  EXPECT_EQ(layer.footprint().ram_bytes - before, buffered);
}

TEST(ProductQuantizer, CodesAreTheNearestCentroidsAndScoresTheirDotProducts) {
  at::manual_seed(3);
  const int64_t n = 300, d = 8;
  const at::Tensor x = at::randn({n, d}).contiguous();
  ProductQuantizer pq;
  pq.train(x.data_ptr<float>(), n, d, /*subspaces=*/2, /*bits=*/3, /*iterations=*/10, /*seed=*/0);
  ASSERT_EQ(pq.centroids(), 8);
  std::vector<uint8_t> codes;
  pq.encode(x.data_ptr<float>(), n, codes);
  ASSERT_EQ(static_cast<int64_t>(codes.size()), n * 2);
  const at::Tensor q = at::randn({d}).contiguous();
  const std::vector<float> approx = pq.approximate_scores(codes, n, pq.score_table(q.data_ptr<float>()));
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int64_t s = 0; s < 2; ++s) {
      // Brute force: the centroid at the least squared distance in this half.
      int64_t best = -1;
      double best_d = 0;
      for (int64_t j = 0; j < 8; ++j) {
        double dist = 0;
        for (int64_t e = 0; e < 4; ++e) dist += std::pow(x[i][s * 4 + e].item<double>() - pq.centroid(s, j)[e], 2);
        if (best < 0 || dist < best_d) best = j, best_d = dist;
      }
      EXPECT_EQ(codes[static_cast<size_t>(i * 2 + s)], best) << "point " << i << " part " << s;
      for (int64_t e = 0; e < 4; ++e) dot += q[s * 4 + e].item<double>() * pq.centroid(s, best)[e];
    }
    EXPECT_NEAR(approx[static_cast<size_t>(i)], dot, 1e-5);
  }
}

// pq: at a decode step each head attends to its sinks, recent window and unwritten entries, and to the
// `budget` written entries whose codes score highest for the group's summed query — recomputed here from
// the codebooks and codes, the attention then brute force over that subset.
TEST(Retrieval, ProductQuantizedSearchMatchesBruteForce) {
  at::manual_seed(4);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 200, budget = 12;
  const int64_t G = f.shape.group_size();
  // Not measuring (no full copy in RAM for recall): the footprint is the strategy's own.
  auto shared = make_retrieval_shared(RetrievalConfig::parse("pq:budget=12,sinks=0,recent=0,cache_kb=0,bits=4"),
                                      RecordFormat{d}, test::make_temp_dir("kvc-ret") + "/store.kvs", false);
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  const at::Tensor k = at::randn({KV, T, d}) * 2, v = at::randn({KV, T, d});
  layer.append(k, v, at::arange(T, at::kLong));
  layer.attend(at::randn({H, T, d}), at::arange(T, at::kLong), {}, nullptr);
  const at::Tensor k1 = at::randn({KV, 1, d}), v1 = at::randn({KV, 1, d}), q = at::randn({H, 1, d}) * 3;
  const at::Tensor p1 = at::full({1}, T, at::kLong);
  layer.append(k1, v1, p1);
  const at::Tensor all_k =
      at::cat({f.model->rope()->apply(k, at::arange(T, at::kLong)), f.model->rope()->apply(k1, p1)}, 1);
  const at::Tensor all_v = at::cat({v, v1}, 1);
  const at::Tensor out = layer.attend(q, p1, {}, nullptr);
  const int64_t per_page = shared->store->per_page(), written = (T + 1) / per_page * per_page;
  ASSERT_GT(written, budget);
  ASSERT_LT(written, T + 1);  // some entries wait in RAM for a whole page
  for (int64_t h = 0; h < KV; ++h) {
    const ProductQuantizer& pq = layer.head_quantizer(h);
    std::vector<uint8_t> codes;
    pq.encode(all_k[h].contiguous().data_ptr<float>(), written, codes);
    const at::Tensor summed = q.narrow(0, h * G, G).view({G, d}).sum(0);
    std::vector<std::pair<double, int64_t>> scored;
    for (int64_t i = 0; i < written; ++i) {
      double s = 0;
      for (int64_t part = 0; part < pq.subspaces(); ++part)
        for (int64_t e = 0; e < d / 2; ++e)
          s += summed[part * d / 2 + e].item<double>() * pq.centroid(part, codes[static_cast<size_t>(i * 2 + part)])[e];
      scored.emplace_back(-s, i);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<int64_t> subset;
    for (int64_t i = 0; i < budget; ++i) subset.push_back(scored[static_cast<size_t>(i)].second);
    for (int64_t i = written; i <= T; ++i) subset.push_back(i);
    const at::Tensor idx = at::tensor(subset, at::kLong);
    const at::Tensor qh = q.narrow(0, h * G, G).view({G, d});
    const at::Tensor p_sub = at::softmax(qh.matmul(all_k[h].index_select(0, idx).t()) / std::sqrt(double(d)), -1);
    const at::Tensor expect = p_sub.matmul(all_v[h].index_select(0, idx));
    EXPECT_TRUE(at::allclose(out.narrow(0, h * G, G).view({G, d}), expect, 1e-4, 1e-5)) << "head " << h;
  }
  // RAM holds codes, codebooks and the unwritten entries, not the written keys and values.
  const int64_t rec = RecordFormat{d}.record_bytes();
  EXPECT_LT(layer.footprint().ram_bytes - shared->store->tail_bytes() - shared->cache->used_bytes(),
            KV * (T + 1 - written) * rec + KV * (written * 2 + 2 * 16 * (d / 2) * 4) + 1);
}

TEST(Retrieval, ProductQuantisationRefusesSubspacesThatDoNotDivideTheHeads) {
  // stories260K's heads have 8 dimensions: 3 parts do not cut them evenly.
  test::expect_error([] { make_retrieval_setup("pq:subspaces=3", "", *fixture().model); },
                     "--retrieval pq:subspaces=3: subspaces=3 does not divide the model's head_dim 8");
}

TEST(Retrieval, OneClusterMatchesBruteForce) {
  at::manual_seed(1);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 48;
  const int64_t G = f.shape.group_size();
  auto shared = make_shared("static:topk=1,sinks=0,recent=0,cache_kb=0");
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  const at::Tensor k = at::randn({KV, T, d}) * 2, v = at::randn({KV, T, d});
  layer.append(k, v, at::arange(T, at::kLong));
  layer.attend(at::randn({H, T, d}), at::arange(T, at::kLong), {}, nullptr);
  // Decode step: the new entry joins a cluster; then one cluster is read.
  const at::Tensor k1 = at::randn({KV, 1, d}), v1 = at::randn({KV, 1, d}), q = at::randn({H, 1, d}) * 3;
  const at::Tensor p1 = at::full({1}, T, at::kLong);
  layer.append(k1, v1, p1);
  const at::Tensor all_k =
      at::cat({f.model->rope()->apply(k, at::arange(T, at::kLong)), f.model->rope()->apply(k1, p1)}, 1);
  const at::Tensor all_v = at::cat({v, v1}, 1);
  const double recall_before = shared->recall_sum;
  const at::Tensor out = layer.attend(q, p1, {}, nullptr);
  double recall = 0;
  for (int64_t h = 0; h < KV; ++h) {
    // Brute force: the cluster whose centroid has the largest summed score over the group.
    const auto& clusters = layer.heads()[h].clusters();
    int64_t best = -1;
    double best_s = 0;
    for (size_t j = 0; j < clusters.size(); ++j) {
      const float* centroid = layer.heads()[h].centroid(static_cast<int64_t>(j));
      const at::Tensor c = at::tensor(std::vector<float>(centroid, centroid + d));
      const double s = (q.narrow(0, h * G, G).view({G, d}).matmul(c)).sum().item<double>();
      if (best < 0 || s > best_s) best = static_cast<int64_t>(j), best_s = s;
    }
    const EntryBlock members = shared->store->read({clusters[best].uid}).front();
    const at::Tensor idx = at::tensor(members.positions, at::kLong);
    const at::Tensor qh = q.narrow(0, h * G, G).view({G, d});
    const at::Tensor p_sub = at::softmax(qh.matmul(all_k[h].index_select(0, idx).t()) / std::sqrt(double(d)), -1);
    const at::Tensor expect = p_sub.matmul(all_v[h].index_select(0, idx));
    EXPECT_TRUE(at::allclose(out.narrow(0, h * G, G).view({G, d}), expect, 1e-4, 1e-5)) << "head " << h;
    const at::Tensor p_all = at::softmax(qh.matmul(all_k[h].t()) / std::sqrt(double(d)), -1);
    recall += p_all.index_select(1, idx).sum(1).mean().item<double>() / KV;
  }
  EXPECT_NEAR((shared->recall_sum - recall_before) / KV, recall, 1e-5);
  EXPECT_LT(recall, 1.0);
}

}  // namespace
}  // namespace kvc::retrieval

namespace kvc::retrieval {
namespace {

TEST(Retrieval, StorageOrderFollowsTheDenseCoRetrievalChain) {
  // The prompt's queries vote for the clusters they would read together; the storage order is the
  // greedy chain through those counts. Brute force: the dense k x k count matrix and the chain as
  // first written (most co-retrieved start, then the unplaced cluster with the highest count, lowest
  // index on ties).
  const int64_t d = 8, T = 300, G = 2, n = 400;
  RetrievalConfig cfg = RetrievalConfig::parse("adaptive:topk=3,csize=8");
  at::manual_seed(3);
  const at::Tensor keys = at::randn({n, d}), queries = at::randn({T, G, d}).contiguous();
  EntryBlock entries(d);
  for (int64_t i = 0; i < n; ++i) entries.push(keys[i].data_ptr<float>(), keys[i].data_ptr<float>(), i);
  const PrefillPartition p = HeadIndex::partition(cfg, entries, queries.data_ptr<float>(), T, G);
  const int64_t k = p.clusters.k;
  ASSERT_EQ(k, 50);
  const at::Tensor centroids = at::from_blob(const_cast<float*>(p.clusters.centroids.data()), {k, d}, at::kFloat);
  const at::Tensor scores = queries.to(at::kDouble).sum(1).matmul(centroids.to(at::kDouble).t());
  std::vector<std::vector<double>> co(k, std::vector<double>(k, 0.0));
  for (int64_t t = 0; t < T; ++t) {
    std::vector<std::pair<double, int64_t>> row;
    for (int64_t j = 0; j < k; ++j) row.emplace_back(-scores[t][j].item<double>(), j);
    std::sort(row.begin(), row.end());
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b)
        if (a != b) co[row[a].second][row[b].second] += 1;
  }
  std::vector<int64_t> expect;
  std::vector<bool> placed(k, false);
  int64_t cur = 0;
  double best_total = -1;
  for (int64_t j = 0; j < k; ++j) {
    double total = 0;
    for (double c : co[j]) total += c;
    if (total > best_total) best_total = total, cur = j;
  }
  for (int64_t m = 0; m < k; ++m) {
    expect.push_back(cur);
    placed[cur] = true;
    int64_t next = -1;
    for (int64_t j = 0; j < k; ++j)
      if (!placed[j] && (next < 0 || co[cur][j] > co[cur][next])) next = j;
    if (next < 0) break;
    cur = next;
  }
  EXPECT_EQ(p.order, expect);
}

TEST(Retrieval, DelayedAndForcedSplitsKeepEveryEntryOnce) {
  at::manual_seed(2);
  const auto& f = fixture();
  const int64_t H = f.shape.num_heads, KV = f.shape.num_kv_heads, d = f.shape.head_dim, T = 32;
  // τ = 0: every new entry is over threshold; topk=1 and no cache: most clusters are not in RAM.
  auto shared = make_shared("adaptive:topk=1,tau_scale=0,bmax=2,cache_kb=0");
  RetrievalLayerCache layer(f.shape, f.model->rope(), shared);
  layer.append(at::randn({KV, T, d}), at::randn({KV, T, d}), at::arange(T, at::kLong));
  layer.attend(at::randn({H, T, d}), at::arange(T, at::kLong), {}, nullptr);
  for (int64_t t = T; t < T + 80; ++t) {
    const at::Tensor pos = at::full({1}, t, at::kLong);
    layer.append(at::randn({KV, 1, d}) * 2, at::randn({KV, 1, d}), pos);
    layer.attend(at::randn({H, 1, d}), pos, {}, nullptr);
    for (const auto& h : layer.heads()) ASSERT_LE(h.buffered(), 2) << "B_max exceeded";
  }
  EXPECT_GT(shared->forced_splits, 0);
  EXPECT_GT(shared->delayed_splits, 0);
  expect_each_entry_once(layer, *shared, T + 80);
}

}  // namespace
}  // namespace kvc::retrieval
