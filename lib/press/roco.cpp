// RoCo (Ren & Zhu 2024, "On the Efficacy of Eviction Policy for Key-Value Constrained Generative Language
// Model Inference", arXiv:2402.06262; the `roco` policy of its code, EasyKV): an entry's importance is the
// mean attention it received over the queries that saw it (not H2O's sum, which favours old entries), and
// only entries whose attention varied little may be evicted: the scope is the budget − margin × budget −
// sinks entries with the lowest standard deviation of that attention, and the least attended entry of the
// scope goes (the margin is EasyKV's recent_ratio: the entries past the scope are kept for their spread).
// The `sinks` oldest and `newest` newest entries are never in the scope. Evicts while decoding, one entry a
// step; a prompt is cut by the same rule applied one eviction at a time to the statistics of its attention
// (EasyKV feeds the prompt in strides against the cache it has already cut). For grouped queries the
// attention is averaged over the KV head's query heads before its spread is taken, as EasyKV does.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <utility>
#include <vector>

#include "press/press.h"

namespace kvc {
namespace {

class RoCoScorer : public Scorer {
 public:
  RoCoScorer(int64_t sinks, double margin, int64_t newest) : sinks_(sinks), margin_(margin), newest_(newest) {}
  AttentionProbe probe() const override {
    AttentionProbe p;
    p.column_sums = true;        // the mean attention's numerator
    p.group_square_sums = true;  // the spread's second moment
    return p;
  }

  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.cumulative.defined() && in.cumulative_squares.defined() &&
                  in.cumulative_squares.sizes() == in.cumulative.sizes(),
              "--press roco: the attention statistics of some entries are missing (roco evicts with every query's "
              "attention row; it cannot run under a decoding schedule or on a cache whose heads keep different "
              "numbers of entries)");
    const at::Tensor pos = in.positions.to(at::kLong).contiguous().cpu();
    const at::Tensor sum = in.cumulative.to(at::kDouble).contiguous().cpu();
    const at::Tensor squares = in.cumulative_squares.to(at::kDouble).contiguous().cpu();
    const int64_t rows = sum.size(0), S = sum.size(1);
    // The sinks and the newest entries, with their protected scores: never in the scope.
    const at::Tensor ends = protect_ends(at::zeros({rows, S}, at::kDouble), sinks_, newest_, pos);
    const at::Tensor guarded = ends.ge(kProtected);
    const int64_t scope = std::max<int64_t>(in.budget - std::llround(margin_ * in.budget) - sinks_, 1);
    at::Tensor order = at::empty({rows, S}, at::kDouble);
    for (int64_t h = 0; h < rows; ++h) {
      const int64_t* p = pos.data_ptr<int64_t>() + h * S;
      const bool* kept = guarded.data_ptr<bool>() + h * S;
      const int64_t last = *std::max_element(p, p + S);
      std::vector<Entry> open;
      open.reserve(static_cast<size_t>(S));
      for (int64_t i = 0; i < S; ++i) {
        if (kept[i]) continue;
        // Every query from the entry's own position on saw it (a kept entry is never hidden from a query).
        const double seen = static_cast<double>(last + 1 - p[i]);
        const double m = sum.data_ptr<double>()[h * S + i] / seen;
        const double var = squares.data_ptr<double>()[h * S + i] / seen - m * m;
        open.push_back({m, std::sqrt(std::max(var, 0.0)), i});
      }
      double* out = order.data_ptr<double>() + h * S;
      std::fill(out, out + S, static_cast<double>(S));
      if (S - in.budget == 1) {
        evict_one(open, scope, out);  // a decode step: one eviction, found in linear time
      } else {
        evictions_in_order(open, scope, out);
      }
    }
    return at::where(guarded, ends, order);
  }

 private:
  struct Entry {
    double mean, spread;
    int64_t index;
  };
  static bool less_spread(const Entry& a, const Entry& b) {
    return a.spread < b.spread || (a.spread == b.spread && a.index < b.index);
  }
  static bool less_mean(const Entry& a, const Entry& b) {
    return a.mean < b.mean || (a.mean == b.mean && a.index < b.index);
  }

  // out[i] = the step at which entry i goes when the open entries are evicted one at a time by RoCo's rule
  // (later = more important). The scope is always the `scope` lowest-spread entries left, a window sliding
  // along the entries sorted by spread: a heap of the window's means gives the one to evict, and the next
  // entry by spread comes in.
  static void evictions_in_order(std::vector<Entry> open, int64_t scope, double* out) {
    std::sort(open.begin(), open.end(), less_spread);
    const auto greater_mean = [](const Entry& a, const Entry& b) { return less_mean(b, a); };
    std::priority_queue<Entry, std::vector<Entry>, decltype(greater_mean)> window(greater_mean);
    size_t next = 0;
    for (; next < open.size() && static_cast<int64_t>(next) < scope; ++next) window.push(open[next]);
    for (int64_t step = 0; !window.empty(); ++step) {
      out[window.top().index] = static_cast<double>(step);
      window.pop();
      if (next < open.size()) window.push(open[next++]);
    }
  }

  // The first eviction alone: the least mean among the `scope` lowest spreads.
  static void evict_one(std::vector<Entry> open, int64_t scope, double* out) {
    if (open.empty()) return;
    const auto n = static_cast<size_t>(std::min<int64_t>(scope, static_cast<int64_t>(open.size())));
    std::nth_element(open.begin(), open.begin() + static_cast<std::ptrdiff_t>(n - 1), open.end(), less_spread);
    out[std::min_element(open.begin(), open.begin() + static_cast<std::ptrdiff_t>(n), less_mean)->index] = 0;
  }

  int64_t sinks_;
  double margin_;
  int64_t newest_;
};

}  // namespace

void register_roco() {
  register_method(
      "roco",
      "mean attention over the queries that saw an entry, evicting only among the entries whose attention varied "
      "least; evicts while decoding (RoCo, arXiv:2402.06262, EasyKV's roco policy; sinks=4,margin=0.1,newest=10)",
      [](const PressParams& p) {
        p.check_known_keys({"sinks", "margin", "newest", "heads"});
        const int64_t sinks = p.get_int("sinks", 4), newest = p.get_int("newest", 10);
        const double margin = p.get_double("margin", 0.1);
        KVC_CHECK(sinks >= 0, "--press roco: sinks is a number of entries, 0 or more (got {})", sinks);
        KVC_CHECK(newest >= 0, "--press roco: newest is a number of entries, 0 or more (got {})", newest);
        KVC_CHECK(margin >= 0 && margin < 1, "--press roco: margin is a share of the budget in [0, 1) (got {})",
                  margin);
        PressConfig c;
        // EasyKV's prompt-time settings: 4 sinks (temp_length), the scope budget − 0.1 × budget − sinks
        // (recent_ratio 0.1), the 10 newest entries kept.
        c.scorer = std::make_shared<RoCoScorer>(sinks, margin, newest);
        c.bounded = true;
        c.cumulative = true;
        c.squared = true;
        return c;
      });
}

}  // namespace kvc
