#pragma once
// The layout ThinK leaves: a layer whose prompt entries hold only some key channels per KV head, so the
// pruned channels take no memory. The prompt's rotated keys are stored [n_kv, n, c] with the channel
// indices [n_kv, c] they came from; values stay whole. A query reads, per head, its own channels of the
// query (q·k over the kept channels is q·k with the others zeroed, kvpress' definition). Entries appended
// later (the question, generated tokens) go to a dense tail with every channel, as kvpress prunes the
// prompt's keys only. Attention is plain ATen over both parts under one softmax.
#include <memory>

#include "cache/dense_layer_cache.h"
#include "cache/layer_cache.h"
#include "core/attention_shape.h"

namespace kvc {

class ChannelPrunedLayerCache : public LayerCache, public PerHeadLayout {
 public:
  // keys: rotated [n_kv, n, c], the channels `channels` [n_kv, c] (int64, ascending) of the full keys; values
  // [n_kv, n, d]; positions [n_kv, n]; tail: an empty dense layer of the same model for later entries.
  ChannelPrunedLayerCache(AttentionShape shape, at::Tensor keys, at::Tensor channels, at::Tensor values,
                          at::Tensor positions, std::unique_ptr<DenseLayerCache> tail);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  // Keeps whole prompt entries and tail entries; every head must keep the same number of prompt entries.
  void retain(const at::Tensor& indices) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;
  std::string layout() const override { return "channel-pruned"; }
  std::unique_ptr<LayerCache> clone() const override;

  // Positions per head (kept records); heads keep one count, so a per-head retain is refused.
  PerHeadLayout* per_head_layout() override { return this; }
  std::unique_ptr<LayerCache> retain_per_head(const std::vector<at::Tensor>& per_head) override;
  at::Tensor entry_positions(int64_t head) const override;

  const at::Tensor& channels() const { return channels_; }
  int64_t pruned_entries() const { return keys_.size(1); }

 private:
  AttentionShape shape_;
  at::Tensor keys_, channels_, values_, positions_;
  std::unique_ptr<DenseLayerCache> tail_;
};

}  // namespace kvc
