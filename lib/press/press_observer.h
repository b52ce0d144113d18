#pragma once
// PressObserver: runs a configured press inside the forward pass (see press.h).
#include <memory>
#include <vector>

#include "cache/attention.h"
#include "core/rope.h"
#include "press/kept_dump.h"
#include "press/press.h"

namespace kvc {

class DenseLayerCache;

struct ModelShape {
  AttentionShape attention;
  int64_t num_layers = 0;
  std::shared_ptr<const Rope> rope;
  at::TensorOptions options;
};

class PressObserver : public ForwardObserver {
 public:
  PressObserver(std::shared_ptr<const PressConfig> config, ModelShape shape);

  AttentionProbe probe(int64_t layer) const override;
  void after_attention(const LayerStep& step, KVCache& cache) override;

  // The next forward pass continues the prompt (the question of a query-agnostic sample, fed after the
  // compressed context): the budget was set on the context, so a bounded press keeps every token of
  // that pass and raises each layer's bound by their number instead of evicting context for them.
  // Later single-token steps evict as usual, holding the cache at the raised bound.
  void hold_next_pass() { hold_next_ = true; }

  // Per-layer entries per head the cache is held to after prefill (for tests and reports).
  const std::vector<int64_t>& layer_budgets() const { return bound_; }

  // Records what the compression keeps (positions after prefill, merges) from the next prompt on.
  void record_kept();
  const KeptRecord& kept_record() const { return record_; }

 private:
  void prefill_layer(const LayerStep& step, KVCache& cache);
  void finish_prefill(KVCache& cache);
  void decode_layer(const LayerStep& step, KVCache& cache);
  // Keeps the top `keep` entries per head by `importance`; returns the kept indices [n_kv, keep].
  at::Tensor compress(int64_t layer, const at::Tensor& importance, int64_t keep, KVCache& cache);
  void reserve_bound(int64_t layer, int64_t bound, KVCache& cache) const;
  static at::Tensor evict_in_place(DenseLayerCache& dense, const at::Tensor& kept);
  void compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep, KVCache& cache);
  void dynamickv_update(int64_t layer, KVCache& cache);
  void record_merges(int64_t layer, const at::Tensor& merged, const at::Tensor& positions);
  std::vector<double> d2o_layer_weights() const;
  std::vector<int64_t> kvpress_pyramid_budgets(int64_t S) const;
  ScoreInput input(int64_t layer, bool prefill, const LayerStep* step) const;

  std::shared_ptr<const PressConfig> config_;
  ModelShape shape_;
  bool prefill_done_ = false;
  bool hold_next_ = false;
  int64_t prompt_len_ = 0, budget_ = 0;
  std::vector<int64_t> bound_;                 // entries per head each layer keeps
  std::vector<at::Tensor> positions_;          // [n_kv, S] per layer, mirrors storage order
  std::vector<at::Tensor> cumulative_;         // [n_kv, S] float64
  std::vector<at::Tensor> current_;            // [n_kv, S] float64
  std::vector<at::Tensor> pending_;            // deferred importance (KVCompose, DynamicKV)
  std::vector<at::Tensor> dyn_scores_;         // DynamicKV: each layer's importance of every prompt entry
  std::vector<double> thresholds_;             // D2O EMA merge threshold per layer (<0: unset)
  bool recording_ = false;
  KeptRecord record_;
  std::vector<double> layer_variance_;         // D2O attention variance per layer (prefill)
};

}  // namespace kvc
