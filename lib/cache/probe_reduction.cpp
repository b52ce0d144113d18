#include "cache/probe_reduction.h"

#include <tuple>

namespace kvc {
namespace {

// Whether `probe` asks for a statistic reduced from every query's rows.
bool asks_reduction(const AttentionProbe& probe) { return probe.group_square_sums || probe.column_max; }

}  // namespace

AttentionProbe probe_with_reductions(const AttentionProbe& asked) {
  AttentionProbe p = asked;
  if (asks_reduction(asked)) p.window = kEveryQuery;
  return p;
}

at::Tensor group_square_sums(const at::Tensor& window_probs, int64_t num_kv_heads) {
  const int64_t H = window_probs.size(0), T = window_probs.size(1), S = window_probs.size(2);
  const at::Tensor group_mean = window_probs.reshape({num_kv_heads, H / num_kv_heads, T, S}).mean(1);
  return group_mean.mul_(group_mean).sum(1).to(at::kDouble);
}

void reduce_probe_statistics(const AttentionProbe& asked, int64_t num_kv_heads, AttentionStats& stats) {
  if (!asks_reduction(asked) || !stats.window_probs.defined()) return;
  if (asked.group_square_sums) stats.group_square_sums = group_square_sums(stats.window_probs, num_kv_heads);
  if (asked.column_max) stats.column_max = std::get<0>(stats.window_probs.max(1));
  const int64_t rows = stats.window_probs.size(1);
  if (asked.window <= 0) {
    stats.window_probs = at::Tensor();
  } else if (asked.window < rows) {
    stats.window_probs = stats.window_probs.narrow(1, rows - asked.window, asked.window).clone();
  }
}

}  // namespace kvc
