#include "cache/blocked_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace kvc {
namespace {

// Upper bound on score-matrix elements per query block (64 MB of float32).
constexpr int64_t kMaxScoreElements = int64_t{16} << 20;

// Entries a block of queries must not see: later positions, or outside the sliding window.
// q_positions [tb]; key_positions [n, S]. Returns [n, 1, tb, S] bool, broadcasting over the query heads
// of a group.
at::Tensor attention_mask(const at::Tensor& q_positions, const at::Tensor& key_positions, int64_t sliding_window) {
  const at::Tensor qp = q_positions.view({1, -1, 1});
  const at::Tensor kp = key_positions.unsqueeze(1);
  at::Tensor masked = kp > qp;  // [n, tb, S]
  if (sliding_window > 0) masked.logical_or_(kp <= qp - sliding_window);
  return masked.unsqueeze(1);
}

// Gathers what a probe asks for from the probabilities of successive query blocks.
class ProbeCollector {
 public:
  ProbeCollector(const AttentionProbe& probe, AttentionStats* stats, int64_t num_heads, int64_t num_queries,
                 int64_t num_entries, const at::TensorOptions& options)
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
  bool active() const { return active_; }

  // probs [n_kv, group, tb, S] of the queries t0..t0+tb-1.
  void add(const at::Tensor& probs, int64_t t0) {
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

 private:
  AttentionProbe probe_;
  AttentionStats* stats_;
  bool active_;
  int64_t num_heads_, num_queries_, num_entries_, window_;
};

}  // namespace

std::optional<int64_t> EntryBlocks::max_position() const {
  const at::Tensor& p = positions();
  // Off the CPU, reading the positions back would wait for the device every step.
  if (!p.device().is_cpu() || p.numel() == 0) return std::nullopt;
  return p.max().item<int64_t>();
}

at::Tensor EntryBlocks::scores(const at::Tensor& queries, int64_t s0, int64_t s1) {
  return at::bmm(queries, keys(s0, s1).transpose(1, 2));
}

at::Tensor DenseEntries::weigh_values(const at::Tensor& probs) {
  const at::Tensor p = probs.scalar_type() == values_.scalar_type() ? probs : probs.to(values_.scalar_type());
  return at::bmm(p, values_.narrow(1, 0, p.size(2)));
}

at::Tensor blocked_attention(const AttentionShape& shape, const at::Tensor& queries, const at::Tensor& q_positions,
                             EntryBlocks& entries, const AttentionProbe& probe, AttentionStats* stats) {
  const int64_t H = shape.num_heads, KV = shape.num_kv_heads, G = shape.group_size(), d = shape.head_dim;
  const int64_t T = queries.size(1), S = entries.size();
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const at::Tensor q_grouped = queries.reshape({KV, G, T, d});
  const at::Tensor& k_pos = entries.positions();
  const at::Tensor q_pos = q_positions.to(k_pos.device());

  // Masking is needed only when some entry lies after some query (prefill) or a window applies.
  bool needs_mask = shape.sliding_window > 0 || T > 1;
  if (!needs_mask && S > 0) {
    const std::optional<int64_t> last = entries.max_position();
    needs_mask = !last || *last > q_pos.min().item<int64_t>();
  }

  ProbeCollector collector(probe, stats, H, T, S, queries.options());
  // Causal prefill over entries stored in position order: a query block sees only a prefix of the
  // entries, so later ones are skipped instead of computed and masked (half the work at long context).
  const bool sorted = T > 1 && S > 1 && !collector.active() &&
                      (k_pos.narrow(1, 1, S - 1) >= k_pos.narrow(1, 0, S - 1)).all().item<bool>();

  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(T, kMaxScoreElements / std::max<int64_t>(1, H * S)));
  std::vector<at::Tensor> outs;
  for (int64_t t0 = 0; t0 < T; t0 += block) {
    const int64_t tb = std::min(block, T - t0);
    const int64_t visible = sorted ? (k_pos <= q_pos.narrow(0, t0, tb).max()).sum(1).max().item<int64_t>() : S;
    const at::Tensor q_block = q_grouped.narrow(2, t0, tb).reshape({KV, G * tb, d});
    const int64_t key_block = std::max<int64_t>(1, entries.key_block(G * tb));
    std::vector<at::Tensor> parts;
    for (int64_t s0 = 0; s0 < visible; s0 += key_block) {
      parts.push_back(entries.scores(q_block, s0, std::min(visible, s0 + key_block)));
    }
    at::Tensor scores = parts.empty()       ? at::zeros({KV, G * tb, 0}, queries.options())
                        : parts.size() == 1 ? parts[0]
                                            : at::cat(parts, 2);
    scores = scores.mul_(scale).view({KV, G, tb, visible});
    if (needs_mask) {
      scores.masked_fill_(attention_mask(q_pos.narrow(0, t0, tb), k_pos.narrow(1, 0, visible), shape.sliding_window),
                          -std::numeric_limits<float>::infinity());
    }
    const at::Tensor probs = at::softmax(scores, -1, scores.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
    collector.add(probs, t0);
    outs.push_back(entries.weigh_values(probs.view({KV, G * tb, visible})).view({KV, G, tb, d}));
  }
  if (outs.empty()) return at::empty({H, 0, d}, queries.options());
  const at::Tensor out = outs.size() == 1 ? outs[0] : at::cat(outs, 2);
  return out.to(queries.scalar_type()).view({H, T, d});
}

}  // namespace kvc
