// DynamicKV (Zhou et al. 2024): task-aware layer budgets. SnapKV-style window scores per layer; each
// layer first keeps up to B_l = (wt − ws) × r_max plus the window; every m layers (Alg. 1) the global
// top-k over every scored entry of the layers seen so far is counted per layer, scaled to
// B_l × count / max(count) and normalised to (wt − ws) × L in all, capped by what each layer still
// holds. The window is always kept. The last layer always updates (the official code updates only at
// layer_idx % 4 == 3, so with L not a multiple of m its last layers would keep B_l and overshoot the budget).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "press/press.h"

namespace kvc {
namespace {

class DynamicKVAllocator : public Allocator {
 public:
  DynamicKVAllocator(int64_t window, int64_t interval, double rmax)
      : window_(window), interval_(interval), rmax_(rmax) {}

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer, L = ctx.shape().num_layers, budget = ctx.budget();
    const auto li = static_cast<size_t>(l);
    pending_.resize(static_cast<size_t>(L));
    scores_.resize(static_cast<size_t>(L));
    const at::Tensor importance = ctx.score(l, &step);
    const int64_t S = importance.size(1);
    // Each layer first keeps up to its maximum budget B_l = (wt − ws) × r_max, plus the window.
    const int64_t ws = std::min(window_, budget);
    const int64_t bmax = std::min<int64_t>(S - ws, std::llround((budget - ws) * rmax_));
    scores_[li] = importance;  // every entry of the layer, for the global top-k
    const at::Tensor kept = ctx.compress(l, importance, bmax + ws);
    pending_[li] = importance.gather(1, kept);
    ctx.set_bound(l, kept.size(1));
    if ((l + 1) % interval_ == 0 || l + 1 == L) update(ctx, l);
  }
  bool splits_budget() const override { return true; }

 private:
  void update(PressContext& ctx, int64_t layer) {
    // DynamicKV Alg. 1, Update_Buffer_Length: the global top-k, k = (wt − ws) · H · l, over every scored
    // (non-window) entry of the layers seen so far, counted per layer (line 6); Z = B^l · count / max
    // (line 8); normalised so the budgets sum to (wt − ws) · L (lines 9–10). Early on that total is
    // spread over fewer layers, so intermediate updates rarely shrink a layer, and a layer trimmed by an
    // earlier update may be given more again (up to the entries it still holds).
    const int64_t seen = layer + 1, L = ctx.shape().num_layers, KV = ctx.shape().attention.num_kv_heads;
    const int64_t ws = std::min(window_, ctx.budget()), a = ctx.budget() - ws;
    std::vector<at::Tensor> pooled;
    std::vector<int64_t> sizes;
    for (int64_t i = 0; i < seen; ++i) {
      const at::Tensor s = scores_[static_cast<size_t>(i)];
      const at::Tensor scored = s.masked_select(s < kProtected);
      pooled.push_back(scored);
      sizes.push_back(scored.numel());
    }
    const at::Tensor all = at::cat(pooled);
    const int64_t k = std::min<int64_t>(a * KV * seen, all.numel());
    if (k <= 0) return;
    const at::Tensor chosen = std::get<1>(all.topk(k));
    at::Tensor layer_of = at::empty({all.numel()}, chosen.options());
    int64_t off = 0;
    for (int64_t i = 0; i < seen; ++i) {
      layer_of.narrow(0, off, sizes[static_cast<size_t>(i)]).fill_(i);
      off += sizes[static_cast<size_t>(i)];
    }
    const at::Tensor counts =
        at::bincount(layer_of.index_select(0, chosen), {}, seen).to(at::kCPU, at::kDouble).contiguous();
    const double* count = counts.data_ptr<double>();
    const double max_count = *std::max_element(count, count + seen);
    const int64_t bmax = std::llround(a * rmax_);
    std::vector<double> weights;
    std::vector<int64_t> lo, held;
    for (int64_t i = 0; i < seen; ++i) {
      weights.push_back(max_count > 0 ? bmax * count[i] / max_count : 0.0);
      lo.push_back(0);
      held.push_back(ctx.bound(i) - std::min(ws, ctx.bound(i)));
    }
    // Z' = Z · (wt − ws) · L / ΣZ, capped by what each layer still holds (the excess goes to the others).
    const int64_t room = std::accumulate(held.begin(), held.end(), int64_t{0});
    const std::vector<int64_t> budgets = distribute(weights, std::min(a * L, room), lo, held);
    for (int64_t i = 0; i < seen; ++i) {
      const auto ii = static_cast<size_t>(i);
      const int64_t keep = budgets[ii] + std::min(ws, ctx.bound(i));
      const at::Tensor kept = ctx.compress(i, pending_[ii], keep);
      pending_[ii] = pending_[ii].gather(1, kept);
      ctx.set_bound(i, keep);
    }
    if (seen == L) {  // the last update sets the final budgets
      pending_.clear();
      scores_.clear();
    }
  }

  int64_t window_, interval_;
  double rmax_;
  std::vector<at::Tensor> pending_;  // each layer's importance of the entries it holds
  std::vector<at::Tensor> scores_;   // each layer's importance of every prompt entry
};

}  // namespace

void register_dynamickv() {
  // Defaults are the official code's (github.com/DreamMr/DynamicKV; the paper states none of them): the
  // run scripts' window 8, kernel 7 and radio_max 10, the average pooling of the context columns alone with
  // zero padding (F.avg_pool1d over attn[..., :-window]), and an update every 4 layers (layer_idx % 4 == 3).
  // The committed results in data/results/eviction/ and data/results/leaderboard/ were made with
  // window=32,kernel=5,pad=edge,pool=all,m=2,rmax=2 (recipes/lib/committed_settings.sh).
  register_method(
      "dynamickv",
      "task-aware layer budgets updated every m layers (DynamicKV, arXiv:2412.14838; window=8,kernel=7,m=4,rmax=10,"
      "pad=zeros,pool=context)",
      [](const PressParams& given) {
        given.check_known_keys({"window", "kernel", "pad", "pool", "m", "rmax", "agg", "heads"});
        PressParams p = given;
        for (const auto& [key, value] :
             {std::pair<const char*, const char*>{"kernel", "7"}, {"pad", "zeros"}, {"pool", "context"}})
          p.values.emplace(key, value);  // the scorer's keys, where the spec leaves them out
        PressConfig c;
        const int64_t window = p.get_int("window", 8);
        c.scorer = make_snapkv_scorer(window, p);
        const int64_t interval = p.get_int("m", 4);
        const double rmax = p.get_double("rmax", 10.0);
        KVC_CHECK(interval >= 1, "--press dynamickv: m must be >= 1, got {}", interval);
        KVC_CHECK(rmax >= 1, "--press dynamickv: rmax must be >= 1, got {}", rmax);
        c.allocator = [window, interval, rmax] { return std::make_unique<DynamicKVAllocator>(window, interval, rmax); };
        return c;
      });
}

}  // namespace kvc
