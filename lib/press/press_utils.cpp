// Selection and budget helpers shared by every press.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/eviction_scan.h"
#include "press/press.h"
#include "util/error.h"

namespace kvc {

at::Tensor aggregate_heads(const at::Tensor& per_query_head, int64_t num_kv_heads, HeadAgg agg) {
  const int64_t h = per_query_head.size(0);
  std::vector<int64_t> shape{num_kv_heads, h / num_kv_heads};
  for (int64_t i = 1; i < per_query_head.dim(); ++i) shape.push_back(per_query_head.size(i));
  const at::Tensor grouped = per_query_head.to(at::kDouble).reshape(shape);
  return agg == HeadAgg::Max ? std::get<0>(grouped.max(1)) : grouped.mean(1);
}

namespace {

template <typename T>
void aggregate_rows(const at::Tensor& per_query_head, HeadAgg agg, const at::Tensor& into, bool accumulate) {
  const int64_t kv = into.size(0), s = into.size(1), group = per_query_head.size(0) / kv;
  const T* in = per_query_head.data_ptr<T>();
  double* out = into.data_ptr<double>();
  const int64_t in_row = per_query_head.stride(0), out_row = into.stride(0);
  for (int64_t h = 0; h < kv; ++h) {
    double* o = out + h * out_row;
    if (group == 1) {  // one query head per KV head: a widening copy or add, which vectorises
      const T* x = in + h * in_row;
      if (accumulate) {
        for (int64_t i = 0; i < s; ++i) o[i] += static_cast<double>(x[i]);
      } else {
        for (int64_t i = 0; i < s; ++i) o[i] = static_cast<double>(x[i]);
      }
      continue;
    }
    for (int64_t i = 0; i < s; ++i) {
      double v = static_cast<double>(in[h * group * in_row + i]);
      for (int64_t g = 1; g < group; ++g) {
        const double x = static_cast<double>(in[(h * group + g) * in_row + i]);
        v = agg == HeadAgg::Max ? (x > v || std::isnan(x) ? x : v) : v + x;
      }
      if (agg != HeadAgg::Max) v /= static_cast<double>(group);
      o[i] = accumulate ? o[i] + v : v;
    }
  }
}

}  // namespace

void aggregate_heads_into(const at::Tensor& per_query_head, HeadAgg agg, const at::Tensor& into, bool accumulate) {
  const int64_t s = into.size(1);
  const bool direct = per_query_head.is_cpu() && into.is_cpu() && per_query_head.dim() == 2 &&
                      per_query_head.size(1) >= s && per_query_head.stride(1) == 1 && into.stride(1) == 1 &&
                      into.scalar_type() == at::kDouble && per_query_head.size(0) % into.size(0) == 0;
  if (direct && per_query_head.scalar_type() == at::kFloat)
    return aggregate_rows<float>(per_query_head, agg, into, accumulate);
  if (direct && per_query_head.scalar_type() == at::kDouble)
    return aggregate_rows<double>(per_query_head, agg, into, accumulate);
  const at::Tensor rows = aggregate_heads(per_query_head, into.size(0), agg).narrow(1, 0, s);
  accumulate ? into.add_(rows) : into.copy_(rows);
}

at::Tensor pool1d(const at::Tensor& scores, int64_t kernel, bool zero_padding) {
  if (kernel <= 1 || scores.size(-1) == 0) return scores;
  const at::Tensor x = scores.reshape({-1, 1, scores.size(-1)});
  return at::avg_pool1d(x, {kernel}, {1}, {kernel / 2}, false, /*count_include_pad=*/zero_padding)
      .reshape(scores.sizes());
}

namespace {

// protect_ends on the CPU in one pass per row after the thresholds (the r-th newest and k-th oldest
// age), the masks without temporaries (a bounded press calls it for every layer at every step).
// Rows are read where they lie (the bookkeeping's rows are apart by their buffer's capacity).
template <typename Age>
at::Tensor protect_ends_cpu(const at::Tensor& in, int64_t sinks, int64_t recent, const at::Tensor& age) {
  const int64_t rows = in.size(0), s = in.size(1);
  const int64_t r = std::min(recent, s), k = std::min(sinks, s);
  at::Tensor out = at::empty({rows, s}, in.options().dtype(at::kDouble));
  std::vector<double> sorted(static_cast<size_t>(s));
  for (int64_t h = 0; h < rows; ++h) {
    const Age* a = age.data_ptr<Age>() + (age.size(0) == 1 ? 0 : h * age.stride(0));
    const double* x = in.data_ptr<double>() + h * in.stride(0);
    double* o = out.data_ptr<double>() + h * s;
    double newest = std::numeric_limits<double>::infinity(), oldest = -std::numeric_limits<double>::infinity();
    if (r > 0) {
      std::copy(a, a + s, sorted.begin());
      std::nth_element(sorted.begin(), sorted.begin() + (s - r), sorted.end());
      newest = sorted[static_cast<size_t>(s - r)];  // the r-th largest age
    }
    if (k > 0) {
      std::copy(a, a + s, sorted.begin());
      std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end());
      oldest = sorted[static_cast<size_t>(k - 1)];  // the k-th smallest age
    }
    for (int64_t i = 0; i < s; ++i) {
      const auto ai = static_cast<double>(a[i]);
      double v = ai >= newest ? ai + kProtected : x[i];
      if (ai <= oldest) v = 2 * kProtected;
      o[i] = v;
    }
  }
  return out;
}

// The n-th newest (or oldest) of a row's positions, by nth_element on a copy (into `scratch`).
int64_t nth_position(const int64_t* a, int64_t s, int64_t n, bool newest, std::vector<int64_t>& scratch) {
  scratch.assign(a, a + s);
  const auto nth = scratch.begin() + (newest ? s - n : n - 1);
  std::nth_element(scratch.begin(), nth, scratch.end());
  return *nth;
}

// protect_ends by positions (int64), as every bounded press calls it while decoding. Such a cache never
// evicts its protected ends, so they are usually runs of consecutive positions: the r newest are then
// those >= the newest position - (r - 1), which counting confirms in one pass. If exactly r positions
// are >= some t, those are the r newest whatever the positions are, so a confirmed guess is exact;
// otherwise nth_element finds the threshold. The same holds for the k oldest. Positions outside
// [0, 2^52) take the general path.
at::Tensor protect_ends_by_position(const at::Tensor& in, int64_t sinks, int64_t recent, const at::Tensor& positions) {
  const int64_t rows = in.size(0), s = in.size(1);
  const int64_t r = std::min(recent, s), k = std::min(sinks, s);
  at::Tensor out = at::empty({rows, s}, in.options().dtype(at::kDouble));
  if (s == 0) return out;
  std::vector<int64_t> scratch;
  for (int64_t h = 0; h < rows; ++h) {
    const int64_t* a = positions.data_ptr<int64_t>() + (positions.size(0) == 1 ? 0 : h * positions.stride(0));
    const PositionRange range = position_range(a, s);
    if (range.oldest < 0 || range.newest >= (int64_t{1} << 52)) {
      return protect_ends_cpu<int64_t>(in, sinks, recent, positions);
    }
    int64_t newest = r > 0 ? range.newest - (r - 1) : std::numeric_limits<int64_t>::max();
    int64_t oldest = k > 0 ? range.oldest + (k - 1) : std::numeric_limits<int64_t>::min();
    const PositionCounts counts = count_positions(a, s, newest, oldest);
    if (r > 0 && counts.at_least != r) newest = nth_position(a, s, r, true, scratch);
    if (k > 0 && counts.at_most != k) oldest = nth_position(a, s, k, false, scratch);
    mark_protected(a, in.data_ptr<double>() + h * in.stride(0), out.data_ptr<double>() + h * s, s, newest, oldest,
                   kProtected);
  }
  return out;
}

}  // namespace

at::Tensor protect_ends(const at::Tensor& importance, int64_t sinks, int64_t recent, const at::Tensor& positions) {
  const int64_t s = importance.size(1);
  // Age of each entry, higher = newer: storage order until a bounded cache starts evicting in place
  // (the newest entry then fills the freed slot), so the position when known (unique per head).
  const bool by_position =
      positions.defined() && positions.dim() == 2 && positions.size(0) == importance.size(0) && positions.size(1) == s;
  if (importance.device().is_cpu() && importance.dim() == 2) {
    at::Tensor in = importance.scalar_type() == at::kDouble ? importance : importance.to(at::kDouble);
    if (in.stride(1) != 1) in = in.contiguous();
    if (by_position && positions.is_cpu() && positions.stride(1) == 1 &&
        (positions.scalar_type() == at::kLong || positions.scalar_type() == at::kDouble)) {
      return positions.scalar_type() == at::kLong ? protect_ends_by_position(in, sinks, recent, positions)
                                                  : protect_ends_cpu<double>(in, sinks, recent, positions);
    }
    const at::Tensor age = by_position ? positions.to(at::kCPU, at::kDouble).contiguous()
                                       : at::arange(s, in.options().dtype(at::kDouble)).unsqueeze(0);
    return protect_ends_cpu<double>(in, sinks, recent, age);
  }
  at::Tensor out = importance.to(at::kDouble).clone();
  const at::Tensor age =
      by_position ? positions.to(at::kDouble) : at::arange(s, out.options()).expand({out.size(0), s});
  // Protected entries rank by recency among themselves (sinks highest), so a budget smaller than
  // sinks + window still keeps the sinks and then the most recent. The r newest and k oldest per row
  // come from top-k thresholds (O(S log r) per step, not two full sorts).
  const int64_t r = std::min(recent, s), k = std::min(sinks, s);
  if (r > 0) {
    const at::Tensor newest = std::get<0>(age.topk(r, 1, /*largest=*/true, /*sorted=*/true)).narrow(1, r - 1, 1);
    out = at::where(age >= newest, age + kProtected, out);
  }
  if (k > 0) {
    const at::Tensor oldest = std::get<0>(age.topk(k, 1, /*largest=*/false, /*sorted=*/true)).narrow(1, k - 1, 1);
    out = at::where(age <= oldest, at::full_like(out, 2 * kProtected), out);
  }
  return out;
}

std::vector<int64_t> chunk_budgets(int64_t length, int64_t chunk, int64_t budget) {
  std::vector<double> lengths;
  std::vector<int64_t> hi;
  for (int64_t a = 0; a < length; a += chunk) {
    hi.push_back(std::min(chunk, length - a));
    lengths.push_back(static_cast<double>(hi.back()));
  }
  return distribute(lengths, std::min(budget, length), std::vector<int64_t>(hi.size(), 0), hi);
}

std::vector<int64_t> distribute(const std::vector<double>& weights, int64_t total, const std::vector<int64_t>& lo,
                                const std::vector<int64_t>& hi) {
  const size_t n = weights.size();
  std::vector<int64_t> out(lo);
  std::vector<bool> fixed(n, false);
  int64_t left = total - std::accumulate(lo.begin(), lo.end(), int64_t{0});
  // Water-filling: spread what is left proportionally over unclamped items; clamp and repeat.
  for (size_t round = 0; round <= n && left > 0; ++round) {
    double wsum = 0;
    for (size_t i = 0; i < n; ++i)
      if (!fixed[i]) wsum += std::max(weights[i], 0.0);
    const bool uniform = wsum <= 0;  // no positive weight left: spread evenly
    if (uniform)
      for (size_t i = 0; i < n; ++i)
        if (!fixed[i]) wsum += 1;
    if (wsum <= 0) break;
    std::vector<double> share(n, 0);
    bool clamped = false;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      const double w = uniform ? 1.0 : std::max(weights[i], 0.0);
      share[i] = left * w / wsum;
      if (out[i] + share[i] >= hi[i]) clamped = true;
    }
    if (clamped) {
      for (size_t i = 0; i < n; ++i) {
        if (!fixed[i] && out[i] + share[i] >= hi[i]) {
          left -= hi[i] - out[i];
          out[i] = hi[i];
          fixed[i] = true;
        }
      }
      continue;
    }
    // Largest remainder rounding.
    std::vector<size_t> order;
    int64_t given = 0;
    for (size_t i = 0; i < n; ++i) {
      if (fixed[i]) continue;
      const auto whole = static_cast<int64_t>(std::floor(share[i]));
      out[i] += whole;
      given += whole;
      order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return share[a] - std::floor(share[a]) > share[b] - std::floor(share[b]); });
    left -= given;
    for (size_t j = 0; left > 0 && j < order.size(); ++j) {
      if (out[order[j]] < hi[order[j]]) {
        ++out[order[j]];
        --left;
      }
    }
    break;
  }
  // Anything still left (all weights zero on the open items) goes wherever there is room.
  for (size_t i = 0; left > 0 && i < n; ++i) {
    const int64_t add = std::min(left, hi[i] - out[i]);
    out[i] += add;
    left -= add;
  }
  return out;
}

at::Tensor row_argmin(const at::Tensor& scores) {
  if (!scores.is_cpu() || scores.dim() != 2 || scores.scalar_type() != at::kDouble || scores.stride(1) != 1 ||
      scores.size(1) == 0) {
    return scores.argmin(1);
  }
  const int64_t rows = scores.size(0), s = scores.size(1);
  at::Tensor out = at::empty({rows}, scores.options().dtype(at::kLong));
  for (int64_t h = 0; h < rows; ++h)
    out.data_ptr<int64_t>()[h] = first_argmin(scores.data_ptr<double>() + h * scores.stride(0), s);
  return out;
}

at::Tensor top_indices(const at::Tensor& scores, int64_t keep) {
  keep = std::min(keep, scores.size(-1));
  const at::Tensor idx = std::get<1>(scores.topk(keep, -1, /*largest=*/true, /*sorted=*/false));
  return std::get<0>(idx.sort(-1));
}

}  // namespace kvc
