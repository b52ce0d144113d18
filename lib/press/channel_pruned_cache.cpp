#include "press/channel_pruned_cache.h"

#include <cmath>
#include <limits>

#include "util/error.h"

namespace kvc {

ChannelPrunedLayerCache::ChannelPrunedLayerCache(AttentionShape shape, at::Tensor keys, at::Tensor channels,
                                                 at::Tensor values, at::Tensor positions,
                                                 std::unique_ptr<DenseLayerCache> tail)
    : shape_(shape),
      keys_(std::move(keys)),
      channels_(std::move(channels)),
      values_(std::move(values)),
      positions_(std::move(positions)),
      tail_(std::move(tail)) {
  KVC_CHECK(shape_.sliding_window == 0, "a channel-pruned layer is a global layer (no sliding window)");
  KVC_CHECK(keys_.dim() == 3 && channels_.dim() == 2 && keys_.size(2) == channels_.size(1) &&
                keys_.size(0) == shape_.num_kv_heads && tail_ != nullptr,
            "channel-pruned layer: keys [n_kv, n, c] with channels [n_kv, c] and a tail expected");
}

void ChannelPrunedLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  tail_->append(keys, values, positions);
}

at::Tensor ChannelPrunedLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                           const AttentionProbe& probe, AttentionStats* stats) {
  const int64_t H = shape_.num_heads, KV = shape_.num_kv_heads, G = H / KV, T = queries.size(1);
  const int64_t d = shape_.head_dim, c = channels_.size(1);
  const at::ScalarType type = queries.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor q = queries.to(type).view({KV, G, T, d});
  // Each head's query restricted to its KV head's kept channels.
  const at::Tensor q_kept = q.gather(3, channels_.to(q.device()).view({KV, 1, 1, c}).expand({KV, G, T, c}));
  const at::Tensor prompt_scores = at::matmul(q_kept, keys_.to(type).transpose(1, 2).unsqueeze(1));   // [KV, G, T, n]
  const at::Tensor tail_scores = at::matmul(q, tail_->keys().to(type).transpose(1, 2).unsqueeze(1));  // [KV, G, T, m]
  at::Tensor scores = at::cat({prompt_scores, tail_scores}, 3) * (1.0 / std::sqrt(static_cast<double>(d)));
  const at::Tensor key_positions = at::cat({positions_, tail_->positions()}, 1);  // [KV, N]
  const int64_t N = key_positions.size(1);
  const at::Tensor future =
      key_positions.view({KV, 1, 1, N}) > q_positions.to(key_positions.device()).view({1, 1, T, 1});
  scores.masked_fill_(future, -std::numeric_limits<double>::infinity());
  const at::Tensor probs = at::softmax(scores, -1);
  const at::Tensor values = at::cat({values_.to(type), tail_->values().to(type)}, 1).unsqueeze(1);  // [KV, 1, N, d]
  const at::Tensor out = at::matmul(probs, values).reshape({H, T, d}).to(queries.scalar_type());
  if (stats != nullptr) {
    if (probe.column_sums) stats->column_sums = probs.sum(2).reshape({H, N}).to(at::kFloat);
    if (probe.window > 0) {
      const int64_t w = std::min(probe.window, T);
      stats->window_probs = probs.narrow(2, T - w, w).reshape({H, w, N}).to(at::kFloat);
    }
  }
  return out;
}

void ChannelPrunedLayerCache::retain(const at::Tensor& indices) {
  const int64_t KV = shape_.num_kv_heads, n = keys_.size(1);
  const at::Tensor idx = indices.to(at::kCPU, at::kLong);
  KVC_CHECK(idx.dim() == 2 && idx.size(0) == KV, "retain: expected indices of shape [{}, k]", KV);
  // Storage order: a head's prompt entries come first; every head must keep as many of them.
  const at::Tensor in_prompt = idx < n;
  const int64_t kept = in_prompt[0].sum().item<int64_t>();
  KVC_CHECK(
      (in_prompt.sum(1) == kept).all().item<bool>() && in_prompt.narrow(1, 0, kept).all().item<bool>(),
      "retain: a channel-pruned layer keeps the same number of prompt entries in every head, before the later ones");
  const at::Tensor head = idx.narrow(1, 0, kept).to(keys_.device());
  const auto rows = [&head](const at::Tensor& t) {
    return t.gather(1, head.unsqueeze(-1).expand({head.size(0), head.size(1), t.size(2)})).contiguous();
  };
  keys_ = rows(keys_);
  values_ = rows(values_);
  positions_ = positions_.gather(1, head).contiguous();
  tail_->retain(idx.narrow(1, kept, idx.size(1) - kept) - n);
}

at::Tensor ChannelPrunedLayerCache::lengths() const { return tail_->lengths() + keys_.size(1); }

CacheFootprint ChannelPrunedLayerCache::footprint() const {
  CacheFootprint f = tail_->footprint();
  const int64_t payload = keys_.nbytes() + values_.nbytes();
  f.entries += keys_.size(0) * keys_.size(1);
  f.payload_bytes += payload;
  f.ram_bytes += payload;
  f.step_read_bytes += payload + static_cast<int64_t>(channels_.nbytes());
  f.resident_bytes += payload + static_cast<int64_t>(positions_.nbytes() + channels_.nbytes());
  return f;
}

std::unique_ptr<LayerCache> ChannelPrunedLayerCache::clone() const {
  std::unique_ptr<LayerCache> tail = tail_->clone();
  auto* dense = dynamic_cast<DenseLayerCache*>(tail.get());
  KVC_CHECK(dense != nullptr, "clone: the tail of a channel-pruned layer is dense");
  tail.release();
  return std::make_unique<ChannelPrunedLayerCache>(shape_, keys_.clone(), channels_.clone(), values_.clone(),
                                                   positions_.clone(), std::unique_ptr<DenseLayerCache>(dense));
}

std::unique_ptr<LayerCache> ChannelPrunedLayerCache::retain_per_head(const std::vector<at::Tensor>&) {
  fail("a channel-pruned layer (ThinK) keeps one number of entries per head; a per-head budget cannot apply to it");
}

at::Tensor ChannelPrunedLayerCache::entry_positions(int64_t head) const {
  return at::cat({positions_[head], tail_->positions()[head]});
}

}  // namespace kvc
