#pragma once
// PressObserver: runs a configured press inside the forward pass (see press.h). It keeps the
// bookkeeping (layer bounds; positions, cumulative, squared and current attention mirroring each layer's storage
// order; what was kept) and leaves how the budget is split to the press's Allocator (allocator.h).
#include <memory>
#include <vector>

#include "press/allocator.h"
#include "press/kept_dump.h"
#include "press/press.h"
#include "press/tracked_rows.h"

namespace kvc {

class PressObserver : public ForwardObserver, public KeptRecorder {
 public:
  PressObserver(std::shared_ptr<const PressConfig> config, ModelShape shape);

  AttentionProbe probe(int64_t layer) const override;
  void after_attention(const LayerStep& step, KVCache& cache) override;

  // The next forward pass continues the prompt (the question of a query-agnostic sample, fed after the
  // compressed context): the budget was set on the context, so a bounded press keeps every token of
  // that pass and raises each layer's bound by their number instead of evicting context for them.
  // Later single-token steps evict as usual, holding the cache at the raised bound.
  void hold_next_pass() override { hold_next_ = true; }
  // A prompt-time press (not bounded, --ratio) compresses a later prompt too (a conversation's next turn):
  // on its own, its entries scored as a prompt by the press's scorer over its own entries and 1 - ratio of
  // them kept, in every layer alike (the allocation over layers is the first prompt's); what the cache
  // held before is left as it is. Bounded presses need no call: they evict on every pass.
  void next_pass_is_prompt() override { prompt_next_ = true; }
  std::vector<int> scoring_tokens(const std::vector<int>& prompt) const override {
    return config_->scoring_tokens && !prefill_done_ ? config_->scoring_tokens(prompt) : std::vector<int>{};
  }

  // Records what the compression keeps (positions after prefill, merges) from the next prompt on.
  KeptRecorder* kept_recorder() override { return this; }
  void record_kept() override;
  const KeptRecord& kept_record() const override { return record_; }

 private:
  class Context;

  void after_press_layer(const LayerStep& model_step, int64_t layer, KVCache& cache);
  void prefill_layer(const LayerStep& step, KVCache& cache);
  void decode_layer(const LayerStep& step, KVCache& cache);
  // A press with a decoding schedule (PressConfig::decoding): buffers the decoded queries and every
  // `interval` passes scores the layer's whole cache and cuts it (press_observer_schedule.cpp).
  void scheduled_decode_layer(const LayerStep& step, KVCache& cache);
  bool compresses_later_prompt() const;
  void later_prompt_layer(const LayerStep& step, KVCache& cache);
  // Keeps the top `keep` entries per head by `importance`; returns the kept indices [n_kv, keep],
  // or an undefined tensor when a decode step's single eviction moved the last entry into the freed slot.
  at::Tensor compress(int64_t layer, const at::Tensor& importance, int64_t keep, KVCache& cache);
  void compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep, KVCache& cache);
  void reserve_bound(int64_t layer, int64_t bound, KVCache& cache) const;
  // One warning per run when a layer keeps fewer entries than the press protects.
  void warn_if_fewer_than_protected(int64_t layer, const at::Tensor& importance, int64_t keep) const;
  ScoreInput input(int64_t layer, bool prefill, const LayerStep* step) const;
  // The input that scores a later pass's tokens as a prompt of their own: `positions` [n_kv, T] theirs, no
  // statistics of the entries before them, `budget` what is kept of them.
  ScoreInput own_input(int64_t layer, const LayerStep& step, const at::Tensor& positions, int64_t budget) const;
  // The press layer of a model layer, or -1 for a layer the press leaves alone.
  int64_t press_layer(int64_t model_layer) const { return press_layer_[static_cast<size_t>(model_layer)]; }
  LayerCache& layer_cache(KVCache& cache, int64_t layer) const {
    return cache.layer(shape_.layers[static_cast<size_t>(layer)]);
  }

  std::shared_ptr<const PressConfig> config_;
  ModelShape shape_;
  std::unique_ptr<Allocator> allocator_;  // this sequence's
  std::vector<int64_t> press_layer_;      // per model layer
  bool prefill_done_ = false;
  bool hold_next_ = false;
  bool prompt_next_ = false;
  int64_t prompt_len_ = 0, budget_ = 0;
  std::vector<int64_t> bound_;                     // entries per head each layer keeps
  std::vector<TrackedRows> positions_;             // [n_kv, S] int64 per layer, mirrors storage order
  std::vector<TrackedRows> cumulative_;            // [n_kv, S] float64
  std::vector<TrackedRows> current_;               // [n_kv, S] float64
  std::vector<TrackedRows> squares_;               // [n_kv, S] float64 (PressConfig::squared)
  std::vector<int64_t> passes_since_compression_;  // per layer, for a decoding schedule
  std::vector<char> decoding_started_;             // per layer: CaM's attention sums have begun
  std::vector<at::Tensor> decoded_queries_;        // [n_heads, <= window, d] per layer, the newest last
  std::vector<at::Tensor> decoded_positions_;      // [<= window] int64 per layer
  bool recording_ = false;
  KeptRecord record_;
};

}  // namespace kvc
