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
#include <memory>
#include <string>
#include <vector>

namespace kvc {

// What a compression method wants to see of a layer's prefill attention. Only what is asked for is
// materialised; attention itself runs in query blocks whatever the prompt length.
struct AttentionProbe {
  bool column_sums = false;  // Σ over queries of attention probability per cached entry
  int64_t window = 0;        // keep the probabilities of the last `window` queries
  bool any() const { return column_sums || window > 0; }
};

struct AttentionStats {
  at::Tensor column_sums;   // [n_heads, n_entries] float32, entries in the cache's storage order
  at::Tensor window_probs;  // [n_heads, window, n_entries] float32
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

  // Keeps, per KV head, the entries at `indices` [n_kv_heads, n_keep] (storage order) and frees the
  // rest. Layouts that share entries across heads (low-rank latents) need identical rows.
  virtual void retain(const at::Tensor& indices) = 0;

  // Number of entries held by each KV head: [n_kv_heads] int64.
  virtual at::Tensor lengths() const = 0;
  virtual CacheFootprint footprint() const = 0;
  // footprint().resident_bytes, for each decode step: a layout whose other figures need a read from the
  // device answers this one without it.
  virtual int64_t resident_bytes() const { return footprint().resident_bytes; }

  // The storage scheme's name, for errors ("dense", "low-rank", ...).
  virtual std::string layout() const = 0;

  // Capabilities compression methods rely on; setup checks them so impossible combinations fail early.
  // Room for `entries` per KV head, so appends up to that size never reallocate (no-op where storage
  // does not grow in place).
  virtual void reserve(int64_t entries) {}
  // Heads may keep different numbers of entries (retain_per_head works).
  virtual bool supports_per_head_lengths() const { return false; }
  // Keys and values are per-head rows that can be rewritten in place (merge_rows works).
  virtual bool supports_merge() const { return false; }

  // Keeps, for KV head h, the entries at per_head[h] (indices within that head's entries, storage
  // order); heads may keep different numbers. Returns null when done in place, or the layer in a
  // per-head layout to take this one's place (KVCache::retain_per_head swaps it in).
  virtual std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head);
  // Drops the entry at slots[h] ([n_kv_heads] int64) of every KV head; returns the new storage order
  // [n_kv_heads, n - 1] (old index per slot). The default retains the others in order; a layout that
  // can move its last entry into the freed slot does that instead.
  virtual at::Tensor evict_one(const at::Tensor& slots);
  // evict_one for a layout that moves its last entry into each freed slot, without building the storage
  // order: callers that track rows per entry apply the same move to them (TrackedRows::swap_remove).
  // Returns false, having done nothing, where the layout cannot (then evict_one).
  virtual bool swap_remove(const std::vector<int64_t>& /*slots*/) { return false; }
  // Writable views of the rotated keys and values [n_kv_heads, n, d], for methods that fold evicted
  // entries into kept ones (D2O).
  struct Rows {
    at::Tensor keys, values;
  };
  virtual Rows merge_rows();
  // Token positions [n] int64 of KV head h's entries, in storage order.
  virtual at::Tensor entry_positions(int64_t head) const;
  // A deep copy: same entries, same capacity, nothing shared (a shared prefill hands each compression
  // method its own copy of the uncompressed cache). Layouts with state outside their buffers refuse.
  virtual std::unique_ptr<LayerCache> clone() const;
};

}  // namespace kvc
