#include "cache/attention.h"

#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/decode_attention.h"
#include "kernels/prefill_attention.h"

namespace kvc {
namespace {

// Upper bound on score-matrix elements per query block (64 MB of float32).
constexpr int64_t kMaxScoreElements = int64_t{16} << 20;

}  // namespace

at::Tensor attention_mask(const at::Tensor& q_positions, const at::Tensor& key_positions, int64_t sliding_window) {
  const at::Tensor qp = q_positions.view({1, -1, 1});
  const at::Tensor kp = key_positions.unsqueeze(1);
  at::Tensor masked = kp > qp;  // [n, tb, S]
  if (sliding_window > 0) masked.logical_or_(kp <= qp - sliding_window);
  return masked.unsqueeze(1);
}

ProbeCollector::ProbeCollector(const AttentionProbe& probe, AttentionStats* stats, int64_t num_heads,
                               int64_t num_queries, int64_t num_entries, const at::TensorOptions& options)
    : probe_(probe),
      stats_(stats),
      active_(stats != nullptr && probe.any()),
      num_heads_(num_heads),
      num_queries_(num_queries),
      num_entries_(num_entries),
      window_(active_ ? std::min(probe.window, num_queries) : 0) {
  if (!active_) return;
  if (probe_.column_sums) stats_->column_sums = at::zeros({num_heads_, num_entries_}, options.dtype(at::kFloat));
  if (window_ > 0) stats_->window_probs = at::empty({num_heads_, window_, num_entries_}, options.dtype(at::kFloat));
}

void ProbeCollector::add(const at::Tensor& probs, int64_t t0) {
  if (!active_) return;
  const int64_t tb = probs.size(2), H = num_heads_, S = num_entries_, T = num_queries_;
  if (probe_.column_sums) stats_->column_sums.add_(probs.sum(2).view({H, S}).to(at::kFloat));
  // Queries t0..t0+tb-1 overlapping the last `window` queries T-window..T-1.
  const int64_t w0 = std::max(t0, T - window_), w1 = t0 + tb;
  if (window_ > 0 && w0 < w1) {
    stats_->window_probs.narrow(1, w0 - (T - window_), w1 - w0)
        .copy_(probs.narrow(2, w0 - t0, w1 - w0).reshape({H, w1 - w0, S}));
  }
}

at::Tensor grouped_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             const at::Tensor& keys, const at::Tensor& values, const at::Tensor& key_positions,
                             const AttentionProbe& probe, AttentionStats* stats, CacheTypes stored) {
  const int64_t H = shape.num_heads, KV = shape.num_kv_heads, G = shape.group_size(), d = shape.head_dim;
  const int64_t T = queries.size(1), S = keys.size(1);
  if (stored.keys == at::ScalarType::Undefined) stored.keys = keys.scalar_type();
  if (stored.values == at::ScalarType::Undefined) stored.values = values.scalar_type();
  if (T == 1 && q_positions.device().is_cpu()) {
    // One query: its attention row is all a method can ask for (column sums = the last window).
    const bool want = stats != nullptr && probe.any();
    at::Tensor probs;
    const at::Tensor fast = fast_decode_attention(queries, q_positions.item<int64_t>(), keys, values, key_positions,
                                                  shape.sliding_window, want ? &probs : nullptr, stored.keys,
                                                  stored.values);
    if (fast.defined()) {
      if (want && probe.column_sums) stats->column_sums = probs;
      if (want && probe.window > 0) stats->window_probs = probs.view({H, 1, S});
      return fast;
    }
  }
  // Rows of blocks: only the decode kernel above reads them as stored; every other path (prefill, a
  // CPU without AVX2) attends over their decoded values.
  if (stored.any_block_format()) {
    return grouped_attention(shape, queries, q_positions, decode_rows(keys, stored.keys, d, queries.scalar_type()),
                             decode_rows(values, stored.values, d, queries.scalar_type()), key_positions, probe,
                             stats);
  }
  // A cache typed below the activations' precision: the decode kernel above reads it as stored; every
  // other path (prefill, GPU, LibTorch) works on a widened copy of the entries.
  if (keys.scalar_type() != queries.scalar_type() || values.scalar_type() != queries.scalar_type()) {
    return grouped_attention(shape, queries, q_positions, keys.to(queries.scalar_type()),
                             values.to(queries.scalar_type()), key_positions, probe, stats);
  }
  if (T > 1 && !(stats != nullptr && probe.any())) {
    const at::Tensor fast =
        fast_prefill_attention(queries, q_positions, keys, values, key_positions, shape.sliding_window);
    if (fast.defined()) return fast;
  }
#if TORCH_VERSION_MAJOR >= 2
  // A GPU prefill into an empty layer (it holds exactly these T tokens, in order): PyTorch's fused causal
  // attention, instead of query blocks that each read their visible length back from the GPU.
  if (T > 1 && T == S && !keys.device().is_cpu() && shape.sliding_window == 0 && !(stats != nullptr && probe.any())) {
    const at::Tensor k = G > 1 ? keys.repeat_interleave(G, 0) : keys;
    const at::Tensor v = G > 1 ? values.repeat_interleave(G, 0) : values;
    return at::scaled_dot_product_attention(queries.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), {}, 0.0,
                                            /*is_causal=*/true)
        .squeeze(0);
  }
#endif
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor q_grouped = queries.view({KV, G, T, d});
  at::Tensor out = at::empty({KV, G, T, d}, queries.options());
  const at::Tensor keys_t = keys.transpose(1, 2);

  // Masking is needed only when some entry lies after some query (prefill) or a window applies.
  const at::Tensor q_pos = q_positions.to(keys.device());
  const at::Tensor k_pos = key_positions.to(keys.device());
  // On a GPU a decode step masks anyway: reading the positions back would wait for the GPU.
  const bool needs_mask = shape.sliding_window > 0 || T > 1 ||
                          (S > 0 && (!k_pos.device().is_cpu() ||
                                     k_pos.max().item<int64_t>() > q_pos.min().item<int64_t>()));

  ProbeCollector collector(probe, stats, H, T, S, queries.options());
  const bool want_stats = collector.active();

  // Causal prefill over entries stored in position order: a query block sees only a prefix of the
  // entries, so later ones are skipped instead of computed and masked (half the work at long context).
  const bool sorted = T > 1 && S > 1 && !want_stats &&
                      (k_pos.narrow(1, 1, S - 1) >= k_pos.narrow(1, 0, S - 1)).all().item<bool>();

  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(T, kMaxScoreElements / std::max<int64_t>(1, H * S)));
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t tb = std::min(block, T - t0);
    const int64_t visible =
        sorted ? (k_pos <= q_pos.narrow(0, t0, tb).max()).sum(1).max().item<int64_t>() : S;
    const at::Tensor q_block = q_grouped.narrow(2, t0, tb).reshape({KV, G * tb, d});
    at::Tensor scores = at::bmm(q_block, keys_t.narrow(2, 0, visible)).mul_(scale).view({KV, G, tb, visible});
    if (needs_mask) {
      scores.masked_fill_(attention_mask(q_pos.narrow(0, t0, tb), k_pos.narrow(1, 0, visible), shape.sliding_window),
                          -std::numeric_limits<float>::infinity());
    }
    const at::Tensor probs = at::softmax(scores, -1, scores.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    collector.add(probs, t0);
    const at::Tensor p = probs.scalar_type() == values.scalar_type() ? probs : probs.to(values.scalar_type());
    out.narrow(2, t0, tb).copy_(
        at::bmm(p.view({KV, G * tb, visible}), values.narrow(1, 0, visible)).view({KV, G, tb, d}));
  }
  return out.view({H, T, d});
}

}  // namespace kvc
