// KVCompose (2025): attention-guided composite tokens. Score = max over task tokens of their attention
// to each context token (task=repeat, the default: a copy of the prompt fed after it, the paper's
// task-agnostic set T = {C}; task=window: the prompt's last tokens, e.g. its question), query heads
// averaged onto KV heads (pooled along the sequence with `kernel`, kvc's departure; kernel=1, the default,
// is the paper's), plus the mean over heads. The k-th
// composite token of a layer takes each head's k-th best entry and scores the mean over heads; all
// layers' composite scores are pooled and the global top (1 − r) × L × N kept (Eq. 20–22), which sets
// each layer's budget; each head then keeps its own top entries. The unstructured variant pools
// per-head scores directly, giving per-(layer, head) budgets.
#include <algorithm>
#include <limits>

#include "press/press.h"

namespace kvc {
namespace {

class KVComposeScorer : public Scorer {
 public:
  KVComposeScorer(int64_t task_tokens, int64_t kernel) : task_tokens_(task_tokens), kernel_(kernel) {}
  // Every task token (the context fed again, or the prompt itself): the maximum reduced as each layer's
  // pass ends; the last window's tokens: their rows.
  AttentionProbe probe() const override {
    AttentionProbe p;
    if (task_tokens_ == kEveryQuery) {
      p.column_max = true;
    } else {
      p.window = task_tokens_;
    }
    return p;
  }
  at::Tensor score(const ScoreInput& in) const override {
    // Eq. 14–16: max over task tokens, mean over the query heads of a KV group, plus the mean over KV heads.
    const AttentionStats& s = in.step->stats;
    const at::Tensor per_head = s.column_max.defined() ? s.column_max : std::get<0>(s.window_probs.max(1));  // [H, S]
    const at::Tensor kv = pool1d(aggregate_heads(per_head, in.num_kv_heads, in.agg), kernel_);
    return kv + kv.mean(0, /*keepdim=*/true);
  }

 private:
  int64_t task_tokens_, kernel_;
};

struct KVComposeOptions {
  bool per_head = false;       // unstructured: per (layer, head) budgets
  int64_t protect_recent = 0;  // newest entries kept in each layer's selection, not in the allocation
  int64_t floor = 0;           // entries every layer keeps at least
  bool first_layer_max = false;
  // The paper's two ablations (its research question 3): budgets=uniform gives every layer the same budget
  // instead of the pooled composites' counts; tokens=aligned keeps the same positions in every head of a
  // layer (ranked by the mean of the heads' scores) instead of each head's own best entries.
  bool uniform_budgets = false;
  bool aligned_tokens = false;
};

class KVComposeAllocator : public Allocator {
 public:
  explicit KVComposeAllocator(KVComposeOptions options) : options_(options) {}

  // Every layer's scores are needed before any budget is known.
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    pending_.resize(static_cast<size_t>(ctx.shape().num_layers));
    pending_[static_cast<size_t>(step.layer)] = ctx.score(step.layer, &step);
  }
  void finish_prefill(PressContext& ctx) override {
    if (options_.aligned_tokens) {
      for (at::Tensor& scores : pending_) scores = scores.mean(0, /*keepdim=*/true).expand_as(scores).contiguous();
    }
    if (options_.per_head) {
      allocate_per_head(ctx);
    } else {
      allocate_per_layer(ctx);
    }
    pending_.clear();
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return options_.per_head; }

 private:
  // kvpress' keep_token_lower_bound: the first `floor` composites always win.
  static constexpr double kFloorBonus = 1e9;

  // The allocation ranks the raw scores; the task tokens are protected only in each layer's own
  // selection (a layer whose budget is below them keeps the newest).
  at::Tensor selection(int64_t layer) const {
    const at::Tensor& raw = pending_[static_cast<size_t>(layer)];
    return options_.protect_recent > 0 ? protect_ends(raw, 0, options_.protect_recent) : raw;
  }

  void allocate_per_layer(PressContext& ctx) const {
    const int64_t L = ctx.shape().num_layers, S = ctx.prompt_length(), total = ctx.budget() * L;
    if (options_.uniform_budgets) {
      for (int64_t l = 0; l < L; ++l) {
        ctx.set_bound(l, std::max<int64_t>(1, std::min(ctx.budget(), S)));
        ctx.compress(l, selection(l), ctx.bound(l));
      }
      return;
    }
    // Eq. 17–19: composite token k of a layer = every head's k-th best entry; its score is the mean over heads.
    at::Tensor composite = at::empty({L, S}, pending_[0].options());
    for (int64_t l = 0; l < L; ++l) {
      composite[l] = std::get<0>(pending_[static_cast<size_t>(l)].sort(-1, /*descending=*/true)).mean(0);
    }
    if (options_.floor > 0) composite.narrow(1, 0, std::min(options_.floor, S)).add_(kFloorBonus);
    if (options_.first_layer_max) composite[0] = std::get<0>(composite.max(0));
    // Eq. 20–22: the global top B_total of the pooled composites; a layer's budget is its count.
    const at::Tensor chosen = std::get<1>(composite.reshape({-1}).topk(std::min(total, L * S)));
    const at::Tensor counts = at::bincount(chosen.div(S, "floor"), {}, L).to(at::kCPU, at::kDouble).contiguous();
    for (int64_t l = 0; l < L; ++l) {
      ctx.set_bound(l, std::max<int64_t>(1, static_cast<int64_t>(counts.data_ptr<double>()[l])));
      ctx.compress(l, selection(l), ctx.bound(l));
    }
  }

  void allocate_per_head(PressContext& ctx) const {
    const int64_t L = ctx.shape().num_layers, KV = ctx.shape().attention.num_kv_heads, S = ctx.prompt_length();
    const int64_t total = ctx.budget() * L;
    at::Tensor sorted = at::empty({L, KV, S}, pending_[0].options());
    for (int64_t l = 0; l < L; ++l) sorted[l] = std::get<0>(pending_[static_cast<size_t>(l)].sort(-1, true));
    if (options_.floor > 0) sorted.narrow(2, 0, std::min(options_.floor, S)).add_(kFloorBonus);
    const at::Tensor chosen = std::get<1>(sorted.reshape({-1}).topk(std::min(total * KV, sorted.numel())));
    const at::Tensor counts = at::bincount(chosen.div(S, "floor"), {}, L * KV).to(at::kCPU, at::kDouble).contiguous();
    for (int64_t l = 0; l < L; ++l) {
      std::vector<int64_t> keep;
      for (int64_t h = 0; h < KV; ++h) keep.push_back(static_cast<int64_t>(counts.data_ptr<double>()[l * KV + h]));
      ctx.compress_per_head(l, selection(l), keep);
    }
  }

  KVComposeOptions options_;
  std::vector<at::Tensor> pending_;  // each layer's scores of every prompt entry
};

PressConfig build(const PressParams& p, bool per_head) {
  p.check_known_keys({"task", "window", "kernel", "floor", "first_layer_max", "agg", "heads", "budgets", "tokens"});
  // Defaults are the paper's task-agnostic setting: T = {C}, the context fed as the task (task=repeat), scored
  // without pooling (kernel=1). The committed results in data/results/eviction/ and data/results/leaderboard/
  // were made with task=window,kernel=5 (recipes/lib/committed_settings.sh).
  const std::string task = p.get_string("task", "repeat");
  KVC_CHECK(task == "window" || task == "all" || task == "repeat",
            "--press {}: task must be window (the last `window` prompt tokens), all (the context itself, "
            "causally) or repeat (a second copy of the context, as kvpress), got '{}'",
            p.name, task);
  const int64_t window = p.get_int("window", 32);
  KVC_CHECK(window >= 1, "--press {}: window must be >= 1", p.name);
  PressConfig c;
  KVComposeOptions o;
  o.per_head = per_head;
  // task=all: every prompt token is a task token (probe windows are clamped to the prompt length).
  // kernel: average pooling of each head's scores along the sequence, as SnapKV's. Not in the paper
  // (kernel=1 is the paper's and kvpress' scoring); with task=window it keeps multi-token facts the question
  // does not attend to directly: on kvc-tiny-lm's needle grid (ratio 0.5, question seen) task=window with
  // kernel=1 keeps 0.25 of the answers, kernel=5 0.85, SnapKV 0.725 (and SnapKV with kernel=1 0.175).
  const int64_t kernel = p.get_int("kernel", 1);
  KVC_CHECK(kernel >= 1 && kernel % 2 == 1, "--press {}: kernel must be odd and >= 1, got {}", p.name, kernel);
  // task=repeat: kvpress feeds the context a second time after itself and scores each token by that
  // copy's attention, so every token is seen by queries that have read the whole context (task=all
  // scores a token only by the queries after it). The copy costs a second prefill's compute.
  if (task == "repeat") c.scoring_tokens = [](const std::vector<int>& prompt) { return prompt; };
  c.scorer = std::make_shared<KVComposeScorer>(task == "window" ? window : kEveryQuery, kernel);
  // The paper compresses the context and then asks the task; when the task tokens (the question) end
  // the compressed prompt they must survive, as SnapKV's window does: protected in each layer's own
  // selection, but ranked by their scores in the global allocation (no floor of `window` per layer).
  o.protect_recent = task == "window" ? window : 0;
  // floor: entries every layer keeps at least (kvpress' keep_token_lower_bound; the paper has none).
  o.floor = p.get_int("floor", 0);
  KVC_CHECK(o.floor >= 0, "--press {}: floor must be >= 0", p.name);
  // first_layer_max=1: the first layer's composite scores are the maximum over layers, so it gets the
  // largest budget (kvpress does this; the paper does not).
  o.first_layer_max = p.get_int("first_layer_max", 0) != 0;
  o.uniform_budgets = p.typed().get_choice("budgets", "adaptive", {"adaptive", "uniform"}) == "uniform";
  o.aligned_tokens = p.typed().get_choice("tokens", "composite", {"composite", "aligned"}) == "aligned";
  KVC_CHECK(!per_head || (!o.uniform_budgets && !o.aligned_tokens),
            "--press {}: budgets= and tokens= are ablations of the structured kvcompose (each head here has a "
            "budget of its own)",
            p.name);
  c.allocator = [o] { return std::make_unique<KVComposeAllocator>(o); };
  return c;
}

}  // namespace

void register_kvcompose() {
  register_method(
      "kvcompose",
      "composite tokens pooled over all layers set layer budgets (KVCompose, arXiv:2509.05165; task=repeat|window|all,"
      "kernel=1; window=32 with task=window; ablations budgets=uniform, tokens=aligned)",
      [](const PressParams& p) { return build(p, /*per_head=*/false); });
  register_method("kvcompose_unstructured",
                  "KVCompose with per-(layer, head) budgets, in the per-head layout (KVCompose, arXiv:2509.05165)",
                  [](const PressParams& p) { return build(p, /*per_head=*/true); });
}

}  // namespace kvc
