#pragma once
// The per-layer KV cache interface every storage scheme implements: dense, evicted/merged (variable
// length per KV head), low-rank (variable rank per token) and retrieval from storage.
//
// Entries are stored per KV head (never expanded per query head). Every entry carries its token
// position, separate from its storage slot, so an evicted or merged cache still masks and rotates
// correctly. The cache computes attention itself, so a scheme can attend in its own representation
// (e.g. values in a spectral basis) without rebuilding the full cache.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

namespace kvc {

// What a compression method wants to see of a layer's prefill attention. Only what is asked for is
// materialised; attention itself runs in query blocks whatever the prompt length.
struct AttentionProbe {
  bool column_sums = false;  // Σ over queries of attention probability per cached entry
  int64_t window = 0;        // keep the probabilities of the last `window` queries
  // Σ over queries of the square of the attention averaged over each KV head's query heads (RoCo's
  // second moment), reduced layer by layer so that no layer's every-query rows outlive its pass.
  bool group_square_sums = false;
  // The largest probability each entry gets from any query (KVzip's and KVCompose's scores over a pass of
  // their own tokens), reduced the same way.
  bool column_max = false;
  bool any() const { return column_sums || window > 0 || group_square_sums || column_max; }
};

// A probe window that asks for every query's probability row (clamped to the pass's length).
constexpr int64_t kEveryQuery = std::numeric_limits<int64_t>::max() / 2;

struct AttentionStats {
  at::Tensor column_sums;        // [n_heads, n_entries] float32, entries in the cache's storage order
  at::Tensor window_probs;       // [n_heads, window, n_entries] float32
  at::Tensor group_square_sums;  // [n_kv_heads, n_entries] float64
  at::Tensor column_max;         // [n_heads, n_entries] float32
};

struct CacheFootprint {
  int64_t entries = 0;         // cached (token, KV head) entries
  int64_t resident_bytes = 0;  // bytes the cache's buffers physically hold (incl. positions)
  int64_t payload_bytes = 0;   // bytes of key/value data in use (what compression is measured on)
  // Of payload_bytes, what sliding-window layers hold: bounded by their window, left to them by compression.
  int64_t window_payload_bytes = 0;
  // Bytes of key/value data held in RAM: the payload, except for a cache that keeps its entries on
  // storage, whose RAM holds what it attends to from memory (sinks, window, buffers) and its index.
  int64_t ram_bytes = 0;
  // Bytes one decode step reads for attention over this cache: its payload in RAM, plus the matrices the
  // cache itself multiplies by every step (a low-rank cache's gates and basis rows). With the weights,
  // what a bandwidth-bound step streams. Reads from storage are not counted.
  int64_t step_read_bytes = 0;
  CacheFootprint& operator+=(const CacheFootprint& o) {
    entries += o.entries;
    resident_bytes += o.resident_bytes;
    payload_bytes += o.payload_bytes;
    window_payload_bytes += o.window_payload_bytes;
    ram_bytes += o.ram_bytes;
    step_read_bytes += o.step_read_bytes;
    return *this;
  }
};

class PerHeadLayout;
class MergeableRows;

// The interface every layout implements: append, attend, keep a subset, and say what it holds. What
// only some layouts can do (heads of different lengths, rows rewritten in place) is a capability,
// reached through per_head_layout() / mergeable_rows(), which are null where the layout lacks it.
class LayerCache {
 public:
  virtual ~LayerCache() = default;

  // New entries for all KV heads. keys are pre-RoPE; keys, values: [n_kv_heads, T, head_dim];
  // positions: [T] int64. A scheme rotates keys when it stores them, or later if it stores pre-RoPE.
  virtual void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) = 0;

  // Attention of already-rotated queries [n_heads, T, head_dim] at q_positions [T] over every cached
  // entry whose position is <= the query's (and inside the sliding window, when the model has one).
  // Returns [n_heads, T, head_dim]. Fills `stats` when `probe` asks for anything.
  virtual at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                            AttentionStats* stats) = 0;

  // Keeps, per KV head, the entries at `indices` [n_kv_heads, n_keep] (storage order; the kept entries
  // take that order) and frees the rest. Layouts that share entries across heads (low-rank latents)
  // need identical rows.
  virtual void retain(const at::Tensor& indices) = 0;
  // Drops the entry at slots[h] ([n_kv_heads] int64) of every KV head, the head's last entry moving into
  // the freed slot: the new storage order is swap_order(slots, n). What a bounded cache does at every
  // decode step; the default retains that order, a layout that can move one row in place overrides it.
  virtual void evict_one(const at::Tensor& slots);

  // Number of entries held by each KV head: [n_kv_heads] int64.
  virtual at::Tensor lengths() const = 0;
  virtual CacheFootprint footprint() const = 0;
  // footprint().resident_bytes, for each decode step: a layout whose other figures need a read from the
  // device answers this one without it.
  virtual int64_t resident_bytes() const { return footprint().resident_bytes; }
  // The storage scheme's name, for errors ("dense", "low-rank", ...).
  virtual std::string layout() const = 0;

  // Room for `entries` per KV head, so appends up to that size never reallocate (no-op where storage
  // does not grow in place).
  virtual void reserve(int64_t entries) {}
  // A deep copy: same entries, same capacity, nothing shared (a shared prefill hands each compression
  // method its own copy of the uncompressed cache). Layouts with state outside their buffers refuse.
  virtual std::unique_ptr<LayerCache> clone() const;

  // Capabilities (null: the layout lacks it).
  virtual PerHeadLayout* per_head_layout() { return nullptr; }
  const PerHeadLayout* per_head_layout() const { return const_cast<LayerCache*>(this)->per_head_layout(); }
  virtual MergeableRows* mergeable_rows() { return nullptr; }
};

// Heads keep different numbers of entries, each head's entries readable by position.
class PerHeadLayout {
 public:
  virtual ~PerHeadLayout() = default;
  // Keeps, for KV head h, the entries at per_head[h] (indices within that head's entries, storage
  // order); heads may keep different numbers. Returns null when done in place, or the layer in a
  // per-head layout to take this one's place (KVCache::retain_per_head swaps it in).
  virtual std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head) = 0;
  // Drops, for KV head h, the entries at erased[h] (indices within that head's entries), the others kept in
  // their order; returns what retain_per_head returns. The default keeps the rest through retain_per_head; a
  // layout that closes the gaps in place overrides it (a few entries dropped per decode step).
  virtual std::unique_ptr<LayerCache> erase_per_head(const std::vector<at::Tensor>& erased);
  // Token positions [n] int64 of KV head h's entries, in storage order.
  virtual at::Tensor entry_positions(int64_t head) const = 0;
};

// Keys and values are per-head rows that can be rewritten in place, for methods that fold evicted
// entries into kept ones (D2O).
class MergeableRows {
 public:
  virtual ~MergeableRows() = default;
  // False where the layout's element types cannot take a rewrite of one row (rows of blocks).
  virtual bool can_merge() const = 0;
  struct Rows {
    at::Tensor keys, values;  // writable views of the rotated keys and values [n_kv_heads, n, d]
  };
  virtual Rows merge_rows() = 0;
};

// The storage order after evict_one(slots) on heads of `length` entries: [n_kv_heads, length - 1],
// each head's slots in order but slots[h], which holds the old last entry (where slots[h] is not it).
at::Tensor swap_order(const at::Tensor& slots, int64_t length);

// `cache`'s capability, or a kvc::Error naming the layout and what `purpose` needed.
PerHeadLayout& require_per_head_layout(LayerCache& cache, const char* purpose);
const PerHeadLayout& require_per_head_layout(const LayerCache& cache, const char* purpose);
MergeableRows& require_mergeable_rows(LayerCache& cache, const char* purpose);

}  // namespace kvc
