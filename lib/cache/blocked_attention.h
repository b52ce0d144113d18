#pragma once
// The one masked softmax attention every cache layout runs: queries in blocks so the score matrix never
// exceeds a fixed size, keys read block by block from whatever holds them, the statistics a probe asks
// for, and only LibTorch operations, so that gate training differentiates through the same code that
// generation runs. What differs between layouts is only where entries come from (EntryBlocks).
#include <ATen/ATen.h>

#include <optional>

#include "cache/layer_cache.h"
#include "core/attention_shape.h"

namespace kvc {

// Where one attention call reads its entries from. Keys come in blocks of positions; values are weighed
// by a block of queries' probabilities, so a layout may keep them in another space (low rank sums them
// in its latent space and projects once).
class EntryBlocks {
 public:
  virtual ~EntryBlocks() = default;
  // [n, S] int64 on the entries' device (n: KV heads, or 1 when every head holds the same positions).
  virtual const at::Tensor& positions() const = 0;
  int64_t size() const { return positions().size(1); }
  // The largest cached position when it is known without reading the device (decoding after every entry
  // without a window needs no mask); nullopt: unknown, so the routine masks.
  virtual std::optional<int64_t> max_position() const;
  // Rotated keys of entries s0..s1-1 in the queries' dtype: [KV, s1 - s0, d].
  virtual at::Tensor keys(int64_t s0, int64_t s1) = 0;
  // Entries one scores() call should cover for `query_rows` rows per KV head (the whole context when
  // keys are held at once, or scored without rebuilding them).
  virtual int64_t key_block(int64_t query_rows) const { return size(); }
  // Unscaled scores of queries [KV, rows, d] against entries s0..s1-1: [KV, rows, s1 - s0]. A layout that
  // can score without rebuilding keys (low rank in a rotated latent) overrides it.
  virtual at::Tensor scores(const at::Tensor& queries, int64_t s0, int64_t s1);
  // Σ_s probs[k, r, s] v_s over entries 0..S'-1 (S' = probs.size(2)): probs [KV, rows, S'] (float32,
  // float64 for float64 queries; converted as the values need) -> [KV, rows, d].
  virtual at::Tensor weigh_values(const at::Tensor& probs) = 0;
};

// Entries held densely: keys [KV, S, d] (rotated) and values [KV, S, d] in the queries' dtype.
class DenseEntries : public EntryBlocks {
 public:
  DenseEntries(at::Tensor keys, at::Tensor values, at::Tensor positions)
      : keys_(std::move(keys)), values_(std::move(values)), positions_(std::move(positions)) {}
  const at::Tensor& positions() const override { return positions_; }
  at::Tensor keys(int64_t s0, int64_t s1) override { return keys_.narrow(1, s0, s1 - s0); }
  at::Tensor weigh_values(const at::Tensor& probs) override;

 private:
  at::Tensor keys_, values_, positions_;
};

// queries [n_heads, T, d] (rotated); q_positions [T] int64. Query head h reads KV head h / group size.
// Returns [n_heads, T, d] in the queries' dtype.
at::Tensor blocked_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             EntryBlocks& entries, const AttentionProbe& probe, AttentionStats* stats);

}  // namespace kvc
