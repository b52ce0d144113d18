// PyramidKV (Cai et al. 2024): SnapKV scores with per-layer budgets decreasing linearly with depth.
#include <cmath>

#include "press/press.h"

namespace kvc {
namespace {

class PyramidAllocator : public Allocator {
 public:
  PyramidAllocator(int64_t window, double beta, bool kvpress_schedule)
      : window_(window), beta_(beta), kvpress_schedule_(kvpress_schedule) {}

  std::vector<int64_t> layer_bounds(const PressContext& ctx) override {
    return kvpress_schedule_ ? kvpress_bounds(ctx) : window_apart_bounds(ctx);
  }
  bool splits_budget() const override { return true; }

 private:
  std::vector<int64_t> window_apart_bounds(const PressContext& ctx) const {
    // PyramidKV: the non-window budget falls linearly from 2a − a/β (first layer) to a/β (last).
    const int64_t L = ctx.shape().num_layers, S = ctx.prompt_length(), budget = ctx.budget();
    const int64_t w = std::min(window_, budget);
    const double a = static_cast<double>(budget - w), mn = a / beta_, mx = 2 * a - mn;
    std::vector<double> weights;
    for (int64_t i = 0; i < L; ++i) weights.push_back(L > 1 ? mx - i * (mx - mn) / (L - 1) : a);
    const std::vector<int64_t> zero(static_cast<size_t>(L), 0), room(static_cast<size_t>(L), S - w);
    std::vector<int64_t> bounds = distribute(weights, (budget - w) * L, zero, room);
    for (auto& x : bounds) x += w;
    return bounds;
  }

  std::vector<int64_t> kvpress_bounds(const PressContext& ctx) const {
    // kvpress' PyramidKV budgets: the whole budget B = S·(1 − r) (window included) falls
    // linearly from 2B − B/β to B/β; uniform when that would leave a layer less than the window. Python's
    // round() is half-to-even, as nearbyint.
    const int64_t L = ctx.shape().num_layers, S = ctx.prompt_length();
    const double kept = ctx.target_entries();
    const double w = static_cast<double>(window_);
    double min_num = kept / beta_, max_num = 2 * kept - min_num;
    if (max_num >= S - w) {
      max_num = S - w;
      min_num = 2 * kept - max_num;
    }
    std::vector<int64_t> out;
    const bool uniform = !(S >= max_num && max_num >= min_num && min_num >= w);
    const double steps = L > 1 ? (max_num - min_num) / static_cast<double>(L - 1) : 0.0;
    for (int64_t l = 0; l < L; ++l) {
      const double b =
          uniform ? std::max(1.0, std::nearbyint(kept)) : std::nearbyint(max_num - static_cast<double>(l) * steps);
      out.push_back(static_cast<int64_t>(b));
    }
    return out;
  }

  int64_t window_;
  double beta_;
  bool kvpress_schedule_;
};

}  // namespace

void register_pyramidkv() {
  register_method("pyramidkv",
                  "SnapKV scores, layer budgets falling linearly with depth (PyramidKV, arXiv:2406.02069; "
                  "window=32,kernel=5,beta=20)",
                  [](const PressParams& p) {
                    auto keys = snapkv_keys();
                    keys.insert(keys.end(), {"beta", "schedule", "agg", "heads"});
                    p.check_known_keys(keys);
                    PressConfig c;
                    const int64_t window = p.get_int("window", 32);
                    c.scorer = make_snapkv_scorer(window, p);
                    const double beta = p.get_double("beta", 20);
                    KVC_CHECK(beta >= 1, "--press pyramidkv: beta must be >= 1");
                    // schedule=kvpress: kvpress' budgets, which count the window inside the linear schedule
                    // and fall back to uniform when the smallest layer budget would be below the window.
                    const std::string schedule = p.get_string("schedule", "window_apart");
                    KVC_CHECK(schedule == "window_apart" || schedule == "kvpress",
                              "--press pyramidkv: schedule must be window_apart or kvpress, got '{}'", schedule);
                    const bool kvpress_schedule = schedule == "kvpress";
                    c.allocator = [window, beta, kvpress_schedule] {
                      return std::make_unique<PyramidAllocator>(window, beta, kvpress_schedule);
                    };
                    return c;
                  });
}

}  // namespace kvc
