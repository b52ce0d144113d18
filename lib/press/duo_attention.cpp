// DuoAttention (Xiao et al. 2024, arXiv:2410.10819): retrieval heads keep the whole context, streaming heads
// only the first `sinks` and the last `recent` entries. The paper trains a gate per head; its trained patterns
// (and kvpress' BookSum samples for its on-the-fly scoring) are on hubs this machine cannot reach. kvc scores
// the heads on the fly as kvpress' duo_attention_on_the_fly does, with the prompt as its one sample: per layer,
// the prompt's mean query (per query head) and mean key (per KV head) before RoPE are repeated at positions
// 0..positions−1 and rotated; the last query's softmax attention over those keys (scaled 1/√d) gives a head
// the mean of its cumulative sum (attention on early positions scores high), averaged over the KV group. The
// round(streaming · layers · KV heads) lowest-scored heads over all layers stream (kvpress' defaults for the
// on-the-fly patterns: 128 sinks, 256 recent). Heads keep different numbers of entries (per-head layout).
// streaming= sets the share of heads. Without it, --ratio or --budget sets how many heads stream: as many as
// remove that share of the cache (each streaming head drops all but its ends), so the cache kept is the one
// the ratio names, within half a head's share. kvpress' evaluation instead streams the ratio's share of the
// heads, which removes less than the ratio (streaming × (1 − ends / prompt)).
#include <cmath>

#include <fmt/format.h>

#include "core/rope.h"
#include "press/press.h"
#include "util/warn_once.h"

namespace kvc {
namespace {

// The parameter that sizes the method by a share of heads; without it --ratio/--budget size it.
constexpr const char* kStreamingKey = "streaming";

struct DuoOptions {
  double streaming = 0.0;
  bool by_cache_share = false;  // no streaming=: --ratio/--budget decide how many heads stream
  int64_t sinks = 128, recent = 256, positions = 500;
};

// A KV head's on-the-fly score [n_kv] float64 (high: a retrieval head); a streaming head keeps its ends.
class DuoScorer : public Scorer {
 public:
  explicit DuoScorer(DuoOptions o) : o_(o) {}
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor zeros = at::zeros(in.positions.sizes(), in.positions.options().dtype(at::kDouble));
    return protect_ends(zeros, o_.sinks, o_.recent, in.positions);
  }
  at::Tensor head_scores(const ScoreInput& in) const {
    const LayerStep& s = *in.step;
    const at::Tensor q = prerope_queries(in, "duo_attention").to(at::kDouble).mean(1, /*keepdim=*/true);  // [H, 1, d]
    const at::Tensor k = s.keys.to(at::kDouble).mean(1, /*keepdim=*/true);                                // [KV, 1, d]
    const int64_t H = q.size(0), KV = k.size(0), d = q.size(2), n = o_.positions;
    const at::Tensor pos = at::arange(n, at::TensorOptions().dtype(at::kLong).device(q.device()));
    const at::Tensor last = s.rope->apply(q.contiguous(), pos.narrow(0, n - 1, 1));  // [H, 1, d]
    const at::Tensor keys = s.rope->apply(k.expand({KV, n, d}).contiguous(), pos);   // [KV, n, d]
    const at::Tensor logits = at::matmul(last.view({KV, H / KV, 1, d}), keys.unsqueeze(1).transpose(2, 3)) /
                              std::sqrt(static_cast<double>(d));  // [KV, G, 1, n]
    return at::softmax(logits, -1).cumsum(-1).mean(-1).view({KV, H / KV}).mean(1);
  }

 private:
  DuoOptions o_;
};

class DuoAllocator : public Allocator {
 public:
  DuoAllocator(std::shared_ptr<const DuoScorer> scorer, DuoOptions o) : scorer_(std::move(scorer)), o_(o) {}

  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const auto L = static_cast<size_t>(ctx.shape().num_layers);
    heads_.resize(L);
    importance_.resize(L);
    ScoreInput in;
    in.layer = step.layer;
    in.step = &step;
    in.positions = step.positions.to(at::kLong).unsqueeze(0).expand({ctx.shape().attention.num_kv_heads, -1});
    KVC_CHECK(step.rope != nullptr, "--press duo_attention: the model gave layer {} no RoPE", step.layer);
    heads_[static_cast<size_t>(step.layer)] = scorer_->head_scores(in);
    importance_[static_cast<size_t>(step.layer)] = scorer_->score(in);
  }
  void finish_prefill(PressContext& ctx) override {
    const int64_t L = ctx.shape().num_layers, KV = ctx.shape().attention.num_kv_heads, S = ctx.prompt_length();
    const at::Tensor scores = at::stack(heads_).reshape({-1}).cpu();  // [L * KV]
    const int64_t ends = std::min(S, o_.sinks + o_.recent);
    const int64_t streaming = streaming_heads(L * KV, S, ends, ctx.target_entries());
    if (o_.by_cache_share && streaming == L * KV && ctx.target_entries() < static_cast<double>(ends))
      warn_once("duo-attention-every-head-streams",
                fmt::format("--press duo_attention: with every head streaming it keeps {} of the {} prompt entries "
                            "per KV head (sinks={} and recent={}), more than --ratio/--budget asks; lower sinks= "
                            "and recent= to remove more",
                            ends, S, o_.sinks, o_.recent));
    std::vector<bool> streams(static_cast<size_t>(L * KV), false);
    if (streaming > 0) {
      const at::Tensor lowest = std::get<1>(scores.topk(streaming, 0, /*largest=*/false)).contiguous();
      for (int64_t i = 0; i < streaming; ++i) streams[static_cast<size_t>(lowest.data_ptr<int64_t>()[i])] = true;
    }
    for (int64_t l = 0; l < L; ++l) {
      std::vector<int64_t> keep;
      for (int64_t h = 0; h < KV; ++h) keep.push_back(streams[static_cast<size_t>(l * KV + h)] ? ends : S);
      ctx.compress_per_head(l, importance_[static_cast<size_t>(l)], keep);
    }
    heads_.clear();
    importance_.clear();
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  // How many of the `heads` (layers × KV heads) stream: streaming='s share, or, sized by the cache, as many as
  // drop the entries the budget (kept per head, on average) leaves out, each dropping all but its `ends`.
  int64_t streaming_heads(int64_t heads, int64_t prompt, int64_t ends, double budget) const {
    if (!o_.by_cache_share) return std::llround(static_cast<double>(heads) * o_.streaming);
    if (budget >= static_cast<double>(prompt) || ends >= prompt) return 0;
    const double dropped = (static_cast<double>(prompt) - budget) * static_cast<double>(heads);
    return std::min(heads, static_cast<int64_t>(std::llround(dropped / static_cast<double>(prompt - ends))));
  }

  std::shared_ptr<const DuoScorer> scorer_;
  DuoOptions o_;
  std::vector<at::Tensor> heads_, importance_;
};

PressConfig build(const PressParams& p) {
  p.check_known_keys({"streaming", "sinks", "recent", "positions", "agg"});
  DuoOptions o;
  o.by_cache_share = p.values.count(kStreamingKey) == 0;
  KVC_CHECK(o.by_cache_share || (p.ratio == 0 && p.budget == 0),
            "--press {}: streaming= (the share of heads) and --ratio/--budget both size it; give one of them", p.name);
  o.streaming = p.get_double("streaming", 0.0);
  KVC_CHECK(o.streaming >= 0 && o.streaming <= 1,
            "--press {}: streaming (the share of heads) must be in [0, 1], got {}", p.name, o.streaming);
  o.sinks = p.get_int("sinks", 128);
  o.recent = p.get_int("recent", 256);
  o.positions = p.get_int("positions", 500);
  KVC_CHECK(o.sinks >= 0, "--press {}: sinks must be >= 0, got {}", p.name, o.sinks);
  KVC_CHECK(o.recent >= 1, "--press {}: recent must be >= 1, got {}", p.name, o.recent);
  KVC_CHECK(o.positions >= 1, "--press {}: positions must be >= 1, got {}", p.name, o.positions);
  auto scorer = std::make_shared<const DuoScorer>(o);
  PressConfig c;
  c.scorer = scorer;
  c.sizes_itself = !o.by_cache_share;
  c.allocator = [scorer, o] { return std::make_unique<DuoAllocator>(scorer, o); };
  return c;
}

}  // namespace

void register_duo_attention() {
  register_method("duo_attention",
                  "streaming heads (scored on the fly from the prompt's mean query and key) keep sinks + recent, "
                  "retrieval heads everything (DuoAttention, arXiv:2410.10819; streaming= the share of heads, or "
                  "--ratio/--budget: as many heads as remove that share of the cache; sinks=128,recent=256,"
                  "positions=500)",
                  build, /*sizes_itself=*/true, /*needs_file=*/false, /*sizing_key=*/kStreamingKey);
}

}  // namespace kvc
