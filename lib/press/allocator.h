#pragma once
// How a press splits its budget over layers and heads: an Allocator strategy, one object per
// sequence, so the state a method carries across layers (scores awaiting a global allocation, EMA
// thresholds) lives in it. PressObserver calls its hooks during the forward pass and gives it a
// PressContext: read and set layer bounds, score a layer, compress a layer. The defaults are the
// uniform allocation: every layer keeps the same budget, compressed as soon as its attention is in.
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <vector>

#include "cache/attention.h"
#include "model/forward_observer.h"

namespace kvc {

struct KeptRecord;

// The layers a press compresses. Layers are numbered 0..num_layers-1 in this order everywhere in the
// press (bounds, scores, allocations); `layers` maps them to the model's. A model with sliding-window
// layers has its presses act on the global ones only: a local layer's cache is already bounded by its window.
struct ModelShape {
  AttentionShape attention;
  int64_t num_layers = 0;
  std::vector<int64_t> layers;  // model layer of each press layer
  int64_t model_layers = 0;     // every layer of the model, compressed or not
  int64_t context = 0;          // the model's context (max_position_embeddings); 0: unknown
};

// What an allocator may read of, and do to, the sequence being compressed.
class PressContext {
 public:
  virtual ~PressContext() = default;
  virtual const ModelShape& shape() const = 0;
  virtual int64_t prompt_length() const = 0;
  // Entries per KV head each layer keeps on average (from --ratio or --budget, at least one).
  virtual int64_t budget() const = 0;
  // The same before rounding: --budget, or the prompt length × (1 − ratio).
  virtual double target_entries() const = 0;
  // Entries per KV head a layer is held to.
  virtual int64_t bound(int64_t layer) const = 0;
  virtual void set_bound(int64_t layer, int64_t entries) = 0;
  // Σ attention each cached entry of a layer received, [n_kv, S] float64 (when the probe asked for column sums).
  virtual const at::Tensor& cumulative(int64_t layer) const = 0;
  // The scorer's importance [n_kv, S] of a layer's entries; `step` is null once its prefill pass is over.
  virtual at::Tensor score(int64_t layer, const LayerStep* step) const = 0;
  // The scorer's importance [n_kv, T] of a later pass's own T tokens, scored as a prompt of their own (the
  // attention statistics of the entries before them left out).
  virtual at::Tensor score_own(int64_t layer, const LayerStep& step) const = 0;
  // Keeps the top `keep` entries per KV head by `importance`; returns the kept indices [n_kv, keep],
  // or an undefined tensor when a decode step's single eviction moved the last entry into the freed slot.
  virtual at::Tensor compress(int64_t layer, const at::Tensor& importance, int64_t keep) = 0;
  // Keeps keep[h] entries of KV head h (the layer's bound becomes the largest); tracking of the layer stops.
  virtual void compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep) = 0;
  // The layer's cache, for methods that change what an entry holds rather than which entries stay (keys
  // re-rotated, key channels pruned); replace_layer_cache swaps in a cache of another layout.
  virtual LayerCache& layer_cache(int64_t layer) = 0;
  virtual void replace_layer_cache(int64_t layer, std::unique_ptr<LayerCache> replacement) = 0;
  // During the prompt's prefill: the tokens fed after it take the positions entries, entries + 1, ...
  // instead of the prompt's length onwards (the kept keys were re-rotated to the positions 0..entries − 1).
  virtual void continue_positions_from(int64_t entries) = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;

  // Adds what the allocation needs to the scorer's prefill probe.
  virtual void adjust_probe(AttentionProbe& probe) const {}
  // Entries per KV head of every layer, at the start of a prefill whose prompt exceeds the budget.
  virtual std::vector<int64_t> layer_bounds(const PressContext& ctx);
  // A prefill layer whose attention is in: by default scored and compressed to its bound.
  virtual void prefill_layer(PressContext& ctx, const LayerStep& step);
  // After the last layer's prefill: where allocations that need every layer's scores happen.
  virtual void finish_prefill(PressContext& ctx) {}
  // Before the entries not in `kept` [n_kv, keep] are dropped from `cache`, model layer `layer` (the one
  // kept records name); `record`, when given, receives what is merged.
  virtual void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) {}

  // Evicts while decoding by a rule of its own (DMS-style thresholds): decode_layer runs after the attention of
  // every pass after the prompt's, in each layer the press compresses.
  virtual bool evicts_while_decoding() const { return false; }
  virtual void decode_layer(PressContext& ctx, const LayerStep& step) {}

  // Sets its own budgets per layer or head (a wrapper such as ada needs a base that does not).
  virtual bool splits_budget() const { return false; }
  // Heads of a layer keep different numbers of entries (the cache must support per-head lengths).
  virtual bool per_head_budgets() const { return false; }
  // Folds evicted entries into kept ones (the cache must support merging).
  virtual bool merges() const { return false; }
};

// Makes a method's allocator, one per sequence.
using AllocatorFactory = std::function<std::unique_ptr<Allocator>()>;

// --budgets: layer l keeps shares[l] of the total (kvc-profile), whatever the method's own split; what
// the method does to evicted entries (D2O's merge) and its probe stay the inner allocator's.
AllocatorFactory layer_share_allocator(std::vector<double> shares, AllocatorFactory inner);

}  // namespace kvc
