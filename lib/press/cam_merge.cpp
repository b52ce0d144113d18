#include "press/cam_merge.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "press/keyed_draw.h"
#include "util/error.h"

namespace kvc {

void cam_merge(const CamMergeInputs& in, const at::Tensor& values) {
  const at::Tensor scores = in.mean_scores.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor kept_t = in.kept.to(at::kCPU, at::kLong).contiguous();
  const at::Tensor attention = in.attention.to(at::kCPU, at::kDouble).contiguous();
  const at::Tensor positions = in.positions.to(at::kCPU, at::kLong).contiguous();
  const int64_t S = scores.numel(), kv = attention.size(0), target = kept_t.numel();
  KVC_CHECK(attention.size(1) == S && positions.size(1) == S && values.size(1) >= S,
            "CaM merge: {} scores for {} attention columns and {} values", S, attention.size(1), values.size(1));
  const std::vector<int64_t> kept(kept_t.data_ptr<int64_t>(), kept_t.data_ptr<int64_t>() + target);
  std::vector<char> is_kept(static_cast<size_t>(S), 0);
  for (int64_t k : kept) is_kept[static_cast<size_t>(k)] = 1;
  std::vector<int64_t> evicted;
  for (int64_t i = 0; i < S; ++i)
    if (!is_kept[static_cast<size_t>(i)]) evicted.push_back(i);
  const double* s = scores.data_ptr<double>();
  // The candidates: the highest-scored evicted entries, the later one first among equal scores.
  std::stable_sort(evicted.begin(), evicted.end(),
                   [&](int64_t a, int64_t b) { return s[a] > s[b] || (s[a] == s[b] && a > b); });
  evicted.resize(static_cast<size_t>(std::min<int64_t>(in.candidates, static_cast<int64_t>(evicted.size()))));
  if (evicted.empty() || target == 0) return;
  // Only the candidates' values are read and only the kept entries in their windows change: a decoding cut
  // touches a few hundred rows of a cache of thousands, so the rest is neither copied nor written back.
  // Candidate i's window: the kept entries first[i] .. first[i] + size[i] - 1 after it, at most `window`.
  std::vector<int64_t> first, size, touched;
  for (int64_t c : evicted) {
    first.push_back(std::upper_bound(kept.begin(), kept.end(), c) - kept.begin());
    size.push_back(std::max<int64_t>(0, std::min<int64_t>(in.window, target - first.back())));
    touched.insert(touched.end(), kept.begin() + first.back(), kept.begin() + first.back() + size.back());
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  if (touched.empty()) return;
  const auto long_tensor = [&](const std::vector<int64_t>& rows) {
    return at::tensor(at::IntArrayRef(rows), at::TensorOptions().dtype(at::kLong)).to(values.device());
  };
  const at::Tensor candidate_rows = long_tensor(evicted), touched_rows = long_tensor(touched);
  const at::Tensor candidates = values.index_select(1, candidate_rows).to(at::kCPU, at::kDouble).contiguous();
  const int64_t d = candidates.size(2), C = candidates.size(1), T = static_cast<int64_t>(touched.size());
  at::Tensor delta = at::zeros({kv, T, d}, candidates.options());
  const double* a = attention.data_ptr<double>();
  const int64_t* pos = positions.data_ptr<int64_t>();
  const double* v = candidates.data_ptr<double>();
  double* out = delta.data_ptr<double>();
  for (int64_t i = 0; i < C; ++i) {
    const int64_t c = evicted[static_cast<size_t>(i)], from = first[static_cast<size_t>(i)];
    const int64_t n = size[static_cast<size_t>(i)];
    if (n == 0) continue;
    // The window is a run of kept entries and every one of them is touched, so it is a run of the touched
    // rows too (both ascending), starting at `slot`.
    const int64_t slot =
        std::lower_bound(touched.begin(), touched.end(), kept[static_cast<size_t>(from)]) - touched.begin();
    for (int64_t h = 0; h < kv; ++h) {
      const double* ah = a + h * S;
      double mean = 0;
      for (int64_t j = 0; j < n; ++j) mean += ah[kept[static_cast<size_t>(from + j)]];
      mean /= static_cast<double>(n);
      double p = ah[c] / mean;
      if (std::isnan(p)) p = 0;
      if (std::isinf(p)) p = 1;
      p = std::clamp(p, 0.0, 1.0);
      if (!(keyed_draw(in.seed, in.layer, h, pos[h * S + c]) < p)) continue;
      const double* vc = v + (h * C + i) * d;
      for (int64_t j = 0; j < n; ++j) {
        double* o = out + (h * T + slot + j) * d;
        for (int64_t e = 0; e < d; ++e) o[e] += vc[e] / static_cast<double>(n);
      }
    }
  }
  const at::Tensor merged = values.index_select(1, touched_rows).to(at::kCPU, at::kDouble) + delta;
  values.index_copy_(1, touched_rows, merged.to(values.device(), values.scalar_type()));
}

}  // namespace kvc
