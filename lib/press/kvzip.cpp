// KVzip (Kim et al. 2025, arXiv:2505.23416): query-agnostic compression by context reconstruction. The
// model reads, after the context, a repeat prompt ("Repeat the previous context exactly.") followed by the
// context again; an entry's importance is the most attention any query of that reconstruction pays to it
// (max over the reconstruction's queries and over the query heads of a KV group). The scores of every
// layer and head compete for one budget (the global top (1 − r) · L · H · S entries; layerwise=1: each
// layer its own share), so heads keep different numbers of entries (per-head layout). kvpress' KVzipPress.
//
// The reconstruction runs in the same pass as the prompt (ForwardObserver::scoring_tokens): its queries
// attend to the prompt and to themselves and never enter the cache, as kvpress' repeat pass, which it trims
// from the cache after each layer.
#include <algorithm>
#include <limits>

#include "press/press.h"

namespace kvc {
namespace {

// kvpress' first-chunk repeat prompt, and its suffix for a tokenizer without a chat template.
constexpr const char* kRepeatPrompt = "\n\nRepeat the previous context exactly.";
constexpr const char* kSuffix = "\n";

class KVzipScorer : public Scorer {
 public:
  KVzipScorer(int64_t sinks, HeadAgg agg) : sinks_(sinks), agg_(agg) {}
  // The largest attention from any query of the reconstruction, reduced as each layer's pass ends.
  AttentionProbe probe() const override {
    AttentionProbe p;
    p.column_max = true;
    return p;
  }
  at::Tensor score(const ScoreInput& in) const override {
    KVC_CHECK(in.step != nullptr && in.step->stats.column_max.defined(),
              "--press kvzip: layer {} has no reconstruction attention to score with", in.layer);
    const at::Tensor& per_head = in.step->stats.column_max;  // [H, S]
    const at::Tensor kv = aggregate_heads(per_head, in.num_kv_heads, agg_).to(at::kDouble);
    return protect_ends(kv, sinks_, 0);
  }

 private:
  int64_t sinks_;
  HeadAgg agg_;
};

class KVzipAllocator : public Allocator {
 public:
  explicit KVzipAllocator(bool layerwise) : layerwise_(layerwise) {}

  // The global selection needs every layer's scores first.
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    pending_.resize(static_cast<size_t>(ctx.shape().num_layers));
    pending_[static_cast<size_t>(step.layer)] = ctx.score(step.layer, &step);
  }

  void finish_prefill(PressContext& ctx) override {
    const int64_t L = ctx.shape().num_layers, KV = ctx.shape().attention.num_kv_heads, S = ctx.prompt_length();
    const int64_t per_layer = ctx.budget() * KV;
    std::vector<at::Tensor> ranked;
    for (const at::Tensor& s : pending_) {
      // Every head keeps its best entry at least: a head with no entry could not attend (kvpress keeps
      // sinks in every head, which does the same whenever the budget covers them).
      at::Tensor r = s.clone();
      r.scatter_(1, std::get<1>(s.max(1, /*keepdim=*/true)), 8 * kProtected);
      ranked.push_back(r.reshape({-1}));
    }
    std::vector<at::Tensor> counts(static_cast<size_t>(L));
    if (layerwise_) {
      for (int64_t l = 0; l < L; ++l) {
        const at::Tensor chosen = std::get<1>(ranked[static_cast<size_t>(l)].topk(std::min(per_layer, KV * S)));
        counts[static_cast<size_t>(l)] = at::bincount(chosen.div(S, "floor"), {}, KV);
      }
    } else {
      const at::Tensor all = at::cat(ranked);
      const at::Tensor chosen = std::get<1>(all.topk(std::min(per_layer * L, all.numel())));
      const at::Tensor by_head = at::bincount(chosen.div(S, "floor"), {}, L * KV).view({L, KV});
      for (int64_t l = 0; l < L; ++l) counts[static_cast<size_t>(l)] = by_head[l];
    }
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor c = counts[static_cast<size_t>(l)].to(at::kCPU, at::kLong).contiguous();
      ctx.compress_per_head(l, pending_[static_cast<size_t>(l)],
                            std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + KV));
    }
    pending_.clear();
  }
  bool splits_budget() const override { return true; }
  bool per_head_budgets() const override { return true; }

 private:
  bool layerwise_;
  std::vector<at::Tensor> pending_;  // each layer's scores [n_kv, S]
};

PressConfig build(const PressParams& p) {
  p.check_known_keys({"sinks", "layerwise", "agg"});
  const int64_t sinks = p.get_int("sinks", 4);
  KVC_CHECK(sinks >= 0, "--press {}: sinks must be >= 0, got {}", p.name, sinks);
  // layerwise=1: every layer keeps (1 − r) of its entries, spread over its heads (kvpress' layerwise=True).
  const bool layerwise = get_flag(p, "layerwise", false);
  // kvpress takes the maximum over a KV group's query heads.
  const std::string agg = p.typed().get_choice("agg", "max", {"max", "mean"});
  PressConfig c;
  c.scorer = std::make_shared<KVzipScorer>(sinks, agg == "max" ? HeadAgg::Max : HeadAgg::Mean);
  c.allocator = [layerwise] { return std::make_unique<KVzipAllocator>(layerwise); };
  const std::string name = p.name;
  c.bind_model = [name](PressConfig& config, const LlamaModel& model) {
    std::vector<int> lead = encode_with_model_tokenizer(model, kRepeatPrompt, name);
    const std::vector<int> suffix = encode_with_model_tokenizer(model, kSuffix, name);
    lead.insert(lead.end(), suffix.begin(), suffix.end());
    config.scoring_tokens = [lead](const std::vector<int>& prompt) {
      std::vector<int> tokens = lead;
      tokens.insert(tokens.end(), prompt.begin(), prompt.end());
      return tokens;
    };
  };
  return c;
}

}  // namespace

void register_kvzip() {
  register_method("kvzip",
                  "attention of a reconstruction of the context (repeat prompt + the context again), one budget "
                  "over layers and heads (KVzip, arXiv:2505.23416; sinks=4,layerwise=0)",
                  build);
}

}  // namespace kvc
