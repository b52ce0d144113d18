// The layer caches (dense and per-head ragged): evicting in place, attention over kept subsets against a
// brute-force softmax, and appends into spare rows.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "model/llama_model.h"
#include "support/paths.h"

namespace kvc {
namespace {

// Its shape and RoPE tables: the caches' tests need no weights of it beyond that.
const LlamaModel& model() {
  static auto m = LlamaModel::load(test::model_dir("stories260K"));
  return *m;
}

// The order evict_one leaves, against the rule written out per head: slot s takes the last entry.
TEST(SwapOrder, TheLastEntryTakesEachFreedSlot) {
  const at::Tensor slots = at::tensor({0, 2, 1, 3}, at::kLong);
  const at::Tensor order = swap_order(slots, 4);
  ASSERT_EQ(order.sizes(), (at::IntArrayRef{4, 3}));
  for (int64_t h = 0; h < 4; ++h) {
    std::vector<int64_t> expected;
    for (int64_t i = 0; i < 4; ++i)
      if (i != slots[h].item<int64_t>()) expected.push_back(i);
    // The last entry, unless it is the one evicted, now sits where the evicted one was.
    const int64_t s = slots[h].item<int64_t>();
    if (s != 3) {
      expected.pop_back();
      expected.insert(expected.begin() + s, 3);
    }
    EXPECT_TRUE(order[h].equal(at::tensor(expected, at::kLong))) << h << ": " << order[h];
  }
  EXPECT_EQ(swap_order(at::tensor({0, 0}, at::kLong), 1).sizes(), (at::IntArrayRef{2, 0}));
}

TEST(DenseCache, EvictOneMovesTheLastEntryIntoTheFreedSlot) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  DenseLayerCache cache(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
  cache.reserve(6);
  const at::Tensor key_input = at::randn({c.num_kv_heads, 5, c.head_dim}),
                   value_input = at::randn({c.num_kv_heads, 5, c.head_dim});
  cache.append(key_input, value_input, at::arange(5, at::kLong));
  const at::Tensor keys = cache.keys().clone(), values = cache.values().clone(), positions = cache.positions().clone();
  const at::Tensor queries = at::randn({c.num_heads, 1, c.head_dim});
  // Head 0 frees slot 1 (entry 4 moves there); every other head evicts its newest entry.
  at::Tensor slots = at::full({c.num_kv_heads}, 4, at::kLong);
  slots[0] = 1;
  // The default eviction of a layout without an in-place move, retain(swap_order(...)), makes the same
  // storage order.
  DenseLayerCache swapped(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
  swapped.reserve(6);
  swapped.append(key_input, value_input, at::arange(5, at::kLong));
  swapped.retain(swap_order(slots, 5));
  cache.evict_one(slots);
  ASSERT_EQ(cache.size(), 4);
  ASSERT_EQ(swapped.size(), 4);
  EXPECT_TRUE(swapped.keys().equal(cache.keys()));
  EXPECT_TRUE(swapped.values().equal(cache.values()));
  EXPECT_TRUE(swapped.positions().equal(cache.positions()));
  const at::Tensor moved = at::tensor({0, 4, 2, 3}, at::kLong), dropped = at::arange(4, at::kLong);
  for (int64_t h = 0; h < c.num_kv_heads; ++h) {
    const at::Tensor order = h == 0 ? moved : dropped;
    EXPECT_TRUE(cache.keys()[h].equal(keys[h].index_select(0, order)));
    EXPECT_TRUE(cache.values()[h].equal(values[h].index_select(0, order)));
    EXPECT_TRUE(cache.positions()[h].equal(positions[h].index_select(0, order)));
  }
  // Attention does not depend on storage order: the same as a cache holding those entries in order.
  const at::Tensor q_pos = at::tensor({5}, at::kLong);
  DenseLayerCache sorted(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
  at::Tensor kept = dropped.unsqueeze(0).repeat({c.num_kv_heads, 1});
  kept[0] = at::tensor({0, 2, 3, 4}, at::kLong);
  const at::Tensor idx3 = kept.unsqueeze(-1).expand({c.num_kv_heads, 4, c.head_dim});
  sorted.assign(keys.gather(1, idx3), values.gather(1, idx3), positions.gather(1, kept));
  EXPECT_LT((cache.attend(queries, q_pos, {}, nullptr) - sorted.attend(queries, q_pos, {}, nullptr))
                .abs()
                .max()
                .item<float>(),
            1e-6);
}

// Appends of fp32/f16/bf16 rows write the buffers directly: the same bits as the tensor route
// (rotated keys converted by LibTorch), from views at a projection's strides, one row and several.
TEST(DenseCache, AppendWritesWhatTheTensorRouteWrites) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  const int64_t KV = c.num_kv_heads, d = c.head_dim;
  for (const at::ScalarType type : {at::kFloat, at::kHalf, at::kBFloat16}) {
    DenseLayerCache cache(shape, model().rope(), at::TensorOptions().dtype(at::kFloat), {type, type});
    std::vector<at::Tensor> keys, values;
    int64_t next = 0;
    for (const int64_t t : {3, 1, 1, 4}) {
      // [t, 2 KV d] as a stacked k/v projection gives them: each row's heads at a stride.
      const at::Tensor kv = at::randn({t, 2 * KV * d});
      const at::Tensor k = kv.narrow(1, 0, KV * d).view({t, KV, d}).transpose(0, 1);
      const at::Tensor v = kv.narrow(1, KV * d, KV * d).view({t, KV, d}).transpose(0, 1);
      const at::Tensor pos = at::arange(next, next + t, at::kLong);
      cache.append(k, v, pos);
      keys.push_back(model().rope()->apply(k, pos).to(type));
      values.push_back(v.to(type));
      next += t;
    }
    ASSERT_EQ(cache.size(), next);
    EXPECT_TRUE(cache.keys().equal(at::cat(keys, 1))) << c10::toString(type);
    EXPECT_TRUE(cache.values().equal(at::cat(values, 1))) << c10::toString(type);
    EXPECT_TRUE(cache.positions().equal(at::arange(next, at::kLong).unsqueeze(0).expand({KV, next})));
  }
}

TEST(RaggedCache, AttentionMatchesDenseAndStats) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  DenseLayerCache dense(shape, model().rope(), opts);
  RaggedLayerCache ragged(shape, model().rope(), opts);
  at::manual_seed(3);
  const at::Tensor k = at::randn({c.num_kv_heads, 20, c.head_dim}), v = at::randn({c.num_kv_heads, 20, c.head_dim});
  const at::Tensor pos = at::arange(20, at::kLong);
  dense.append(k, v, pos);
  ragged.append(k, v, pos);
  const at::Tensor q = at::randn({c.num_heads, 1, c.head_dim});
  const at::Tensor qp = at::full({1}, 20, at::kLong);
  AttentionStats sd, sr;
  const AttentionProbe probe{true, 1};
  EXPECT_TRUE(dense.attend(q, qp, probe, &sd).allclose(ragged.attend(q, qp, probe, &sr), 1e-6, 1e-6));
  EXPECT_TRUE(sd.column_sums.allclose(sr.column_sums, 1e-6, 1e-6));
  // Per-head subsets: the ragged cache equals a brute-force softmax over each head's kept entries.
  std::vector<at::Tensor> keep;
  for (int64_t h = 0; h < c.num_kv_heads; ++h) keep.push_back(at::arange(0, 20, h + 1, at::kLong));
  ragged.retain_ragged(keep);
  const at::Tensor out = ragged.attend(q, qp, {}, nullptr);
  const int64_t g = c.group_size();
  for (int64_t qh = 0; qh < c.num_heads; ++qh) {
    const int64_t h = qh / g;
    const at::Tensor kh = dense.keys()[h].index_select(0, keep[static_cast<size_t>(h)]);
    const at::Tensor vh = dense.values()[h].index_select(0, keep[static_cast<size_t>(h)]);
    const at::Tensor p = at::softmax(at::matmul(q[qh], kh.t()) / std::sqrt(double(c.head_dim)), -1);
    EXPECT_TRUE(out[qh].allclose(at::matmul(p, vh), 1e-5, 1e-6)) << qh;
  }
  // Memory really shrinks to the kept entries.
  int64_t kept = 0;
  for (const auto& x : keep) kept += x.numel();
  EXPECT_EQ(ragged.footprint().entries, kept);
  EXPECT_EQ(ragged.footprint().payload_bytes, kept * 2 * c.head_dim * 4);
}

// Decoding into a per-head cache writes into each head's spare rows: appending one token at a time
// regrows the regions O(log n) times (geometrically), and every head still reads exactly its own
// entries, in order, after each regrowth.
TEST(RaggedCache, AppendsFillSpareRowsAndRegrowGeometrically) {
  const auto& c = model().config();
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  RaggedLayerCache ragged(shape, model().rope(), at::TensorOptions().dtype(at::kFloat));
  at::manual_seed(5);
  const int64_t prompt = 30, steps = 300;
  const at::Tensor k = at::randn({c.num_kv_heads, prompt + steps, c.head_dim});
  const at::Tensor v = at::randn({c.num_kv_heads, prompt + steps, c.head_dim});
  const at::Tensor pos = at::arange(prompt + steps, at::kLong);
  ragged.append(k.narrow(1, 0, prompt), v.narrow(1, 0, prompt), pos.narrow(0, 0, prompt));
  std::vector<at::Tensor> keep;  // head h keeps every (h + 1)-th prompt entry
  for (int64_t h = 0; h < c.num_kv_heads; ++h) keep.push_back(at::arange(0, prompt, h + 1, at::kLong));
  ragged.retain_ragged(keep);
  int64_t regrowths = 0, resident = ragged.footprint().resident_bytes;
  for (int64_t t = prompt; t < prompt + steps; ++t) {
    ragged.append(k.narrow(1, t, 1), v.narrow(1, t, 1), pos.narrow(0, t, 1));
    const int64_t now = ragged.footprint().resident_bytes;
    regrowths += now != resident;
    resident = now;
  }
  EXPECT_LE(regrowths, 12);  // 1.5x growth from ~10 rows to 330: about 9 regrowths, not 300 copies
  const at::Tensor rotated_new = model().rope()->apply(k.narrow(1, prompt, steps), pos.narrow(0, prompt, steps));
  for (int64_t h = 0; h < c.num_kv_heads; ++h) {
    const at::Tensor kept = keep[static_cast<size_t>(h)];
    const int64_t n = kept.numel();
    ASSERT_EQ(ragged.head_positions(h).numel(), n + steps);
    EXPECT_TRUE(at::equal(ragged.head_positions(h), at::cat({kept, pos.narrow(0, prompt, steps)})));
    EXPECT_TRUE(at::equal(ragged.head_values(h), at::cat({v[h].index_select(0, kept), v[h].narrow(0, prompt, steps)})));
    EXPECT_TRUE(at::equal(ragged.head_keys(h).narrow(0, n, steps), rotated_new[h]));
  }
  EXPECT_EQ(ragged.indptr()[-1].item<int64_t>(), ragged.lengths().sum().item<int64_t>());
}

// Erasing in place (a few entries per decode step) leaves each head what retaining the rest leaves, in the same
// order, keeps the spare rows (no reallocation), and later appends land after the remaining entries; for rows
// of every width (float32, f16, q8_0 blocks) and with an index named twice.
TEST(RaggedCache, ErasingInPlaceEqualsRetainingTheRest) {
  ModelConfig c;  // a head of 32 dimensions: one q8_0 block per row
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 32;
  c.hidden_size = c.num_heads * c.head_dim;
  c.max_position_embeddings = 64;
  const auto rope = std::make_shared<const Rope>(c, at::kCPU);
  const AttentionShape shape{c.num_heads, c.num_kv_heads, c.head_dim, 0};
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  for (const char* type : {"f32", "f16", "q8_0"}) {
    SCOPED_TRACE(type);
    const at::ScalarType stored = parse_cache_type(type, "--cache-type-k");
    const CacheTypes types{stored, stored};
    RaggedLayerCache erased(shape, rope, opts, types), retained(shape, rope, opts, types);
    at::manual_seed(9);
    const int64_t n = 40;
    const at::Tensor k = at::randn({c.num_kv_heads, n + 1, c.head_dim}),
                     v = at::randn({c.num_kv_heads, n + 1, c.head_dim});
    const at::Tensor pos = at::arange(n + 1, at::kLong);
    for (RaggedLayerCache* cache : {&erased, &retained}) {
      cache->append(k.narrow(1, 0, n), v.narrow(1, 0, n), pos.narrow(0, 0, n));
      std::vector<at::Tensor> every_other;  // per-head lengths differ before the erase
      for (int64_t h = 0; h < c.num_kv_heads; ++h) every_other.push_back(at::arange(0, n - h, at::kLong));
      cache->retain_ragged(every_other);
    }
    std::vector<at::Tensor> gone, rest;
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      const int64_t len = n - h;
      // Unsorted, across the region, one named twice, and head 0's last entry.
      const std::vector<int64_t> indices =
          h == 0 ? std::vector<int64_t>{len - 1, 3, len - 9, 3} : std::vector<int64_t>{len - 5, 3 + h, len - 9};
      gone.push_back(at::tensor(indices, at::kLong));
      at::Tensor keep = at::ones({len}, at::kBool);
      keep.index_fill_(0, gone.back(), false);
      rest.push_back(keep.nonzero().squeeze(1));
    }
    const int64_t resident = erased.footprint().resident_bytes;
    EXPECT_EQ(erased.erase_per_head(gone), nullptr);
    retained.retain_ragged(rest);
    EXPECT_EQ(erased.footprint().resident_bytes, resident);
    for (RaggedLayerCache* cache : {&erased, &retained})
      cache->append(k.narrow(1, n, 1), v.narrow(1, n, 1), pos.narrow(0, n, 1));
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      EXPECT_TRUE(at::equal(erased.head_positions(h), retained.head_positions(h))) << h;
      EXPECT_TRUE(at::equal(erased.head_keys(h), retained.head_keys(h))) << h;
      EXPECT_TRUE(at::equal(erased.head_values(h), retained.head_values(h))) << h;
      EXPECT_EQ(erased.head_positions(h)[-1].item<int64_t>(), n);
    }
    EXPECT_EQ(erased.footprint().entries, retained.footprint().entries);
    // An index past a head's entries is a one-line error, not a silent move.
    std::vector<at::Tensor> outside(static_cast<size_t>(c.num_kv_heads), at::empty({0}, at::kLong));
    outside[0] = at::tensor({erased.head_positions(0).size(0)}, at::kLong);
    EXPECT_THROW(erased.erase_per_head(outside), std::exception);
  }
}

}  // namespace
}  // namespace kvc
