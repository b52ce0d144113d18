#include "press/attention_profile.h"

#include <cmath>

#include "press/press.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc {
namespace {

// Collects, per layer, the column sums and the task tokens' attention of one window.
class ProfileObserver : public ForwardObserver {
 public:
  explicit ProfileObserver(int64_t task_window) : task_window_(task_window) {}
  AttentionProbe probe(int64_t) const override { return {true, task_window_}; }
  void after_attention(const LayerStep& step, KVCache&) override { stats.push_back(step.stats); }
  std::vector<AttentionStats> stats;

 private:
  int64_t task_window_;
};

// Share of each group kept when the top `keep` of `scores` [G, N] (pooled) are chosen.
at::Tensor pooled_share(const at::Tensor& scores, int64_t keep) {
  const int64_t g = scores.size(0), n = scores.size(1);
  const at::Tensor chosen = std::get<1>(scores.reshape({-1}).topk(std::min(keep, g * n)));
  return at::bincount(chosen.div(n, "floor"), {}, g).to(at::kDouble) / n;
}

}  // namespace

AttentionProfile profile_attention(const LlamaModel& model, const std::vector<int>& ids, const ProfileOptions& o) {
  o.validate();
  const ModelConfig& c = model.config();
  const int64_t L = c.num_layers, KV = c.num_kv_heads, S = o.context;
  KVC_CHECK(S >= 2 * o.task_window, "--context {} must be at least twice --task-window {}", S, o.task_window);
  KVC_CHECK(S <= c.max_position_embeddings, "--context {} exceeds the model's context {}", S,
            c.max_position_embeddings);
  const int64_t available = static_cast<int64_t>(ids.size()) / S;
  KVC_CHECK(available >= 1, "the profiling text has {} tokens; --context {} needs at least that many", ids.size(), S);
  const int64_t windows = std::min(o.windows, available);
  const int64_t R = static_cast<int64_t>(o.ratios.size());

  AttentionProfile p;
  p.windows = windows;
  p.context = S;
  p.layer_variance = at::zeros({L}, at::kDouble);
  p.layer_entropy = at::zeros({L}, at::kDouble);
  p.kvcompose_retention = at::zeros({R, L}, at::kDouble);
  p.kvcompose_head_retention = at::zeros({R, L, KV}, at::kDouble);
  p.dynamickv_retention = at::zeros({R, L}, at::kDouble);
  p.cumulative_attention = at::zeros({L, S}, at::kDouble);

  Progress progress("profile", windows, "windows", o.show_progress);
  for (int64_t w = 0; w < windows && !interrupted(); ++w) {
    const std::vector<int> window(ids.begin() + w * S, ids.begin() + (w + 1) * S);
    KVCache cache = model.new_cache();
    ProfileObserver observer(o.task_window);
    ForwardOptions fo;
    fo.all_logits = false;
    fo.observer = &observer;
    model.forward(window, cache, fo);
    std::vector<at::Tensor> composite, per_head, snap;
    for (int64_t l = 0; l < L; ++l) {
      const AttentionStats& st = observer.stats[static_cast<size_t>(l)];
      const at::Tensor cum = st.column_sums.to(at::kDouble).mean(0);  // [S] mean over heads
      p.layer_variance[l] += cum.var().item<double>() / windows;
      p.cumulative_attention[l] += cum / windows;
      const at::Tensor probs = st.window_probs.to(at::kDouble);  // [H, W, S]
      p.layer_entropy[l] += -(probs * probs.clamp_min(1e-30).log()).sum(-1).mean().item<double>() / windows;
      // KVCompose: max over task tokens, mean onto KV heads, plus the mean over heads.
      const at::Tensor kv = aggregate_heads(std::get<0>(probs.max(1)), KV, HeadAgg::Mean);
      const at::Tensor score = kv + kv.mean(0, true);
      per_head.push_back(score);
      composite.push_back(std::get<0>(score.sort(-1, true)).mean(0));
      // DynamicKV: SnapKV-style window votes of the non-window entries, pooled over heads.
      snap.push_back(
          pool1d(aggregate_heads(probs.sum(1), KV, HeadAgg::Mean), 5).narrow(1, 0, S - o.task_window).mean(0));
    }
    const at::Tensor comp = at::stack(composite), heads = at::stack(per_head), dyn = at::stack(snap);
    for (int64_t r = 0; r < R; ++r) {
      const double keep = 1.0 - o.ratios[static_cast<size_t>(r)];
      const auto total = static_cast<int64_t>(std::llround(keep * S * L));
      p.kvcompose_retention[r] += pooled_share(comp, total) / windows;
      p.kvcompose_head_retention[r] += pooled_share(heads.reshape({L * KV, S}), total * KV).view({L, KV}) / windows;
      const auto dyn_keep = std::max<int64_t>(0, total - o.task_window * L);
      p.dynamickv_retention[r] += (pooled_share(dyn, dyn_keep) * (S - o.task_window) + o.task_window) / S / windows;
    }
    progress.advance();
  }
  progress.finish();
  stop_if_interrupted("interrupted; nothing written");

  const at::Tensor inv = 1.0 / p.layer_variance.clamp_min(1e-12);
  p.d2o_layer_weights = at::softmax(inv / inv.mean(), 0);
  p.ratios = at::tensor(o.ratios, at::kDouble);
  p.layer_budget_shares = p.kvcompose_retention / p.kvcompose_retention.sum(1, true).clamp_min(1e-12);
  // A model that attends with NaN would otherwise write budgets that every later run trusts.
  KVC_CHECK(
      at::isfinite(p.layer_budget_shares).all().item<bool>() && at::isfinite(p.d2o_layer_weights).all().item<bool>(),
      "the attention statistics are not finite (NaN or infinity); the model's weights or inputs are broken");
  return p;
}

}  // namespace kvc
