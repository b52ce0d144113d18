// KVCompose (2025): attention-guided composite tokens. Score = max over task tokens of their attention
// to each context token, query heads averaged onto KV heads (pooled along the sequence with `kernel`,
// kvc's departure; kernel=1 is the paper's), plus the mean over heads. The k-th
// composite token of a layer takes each head's k-th best entry and scores the mean over heads; all
// layers' composite scores are pooled and the global top (1 − r) × L × N kept (Eq. 20–22), which sets
// each layer's budget; each head then keeps its own top entries (PressObserver::finish_prefill). The
// unstructured variant pools per-head scores directly, giving per-(layer, head) budgets.
#include <limits>

#include "press/press.h"

namespace kvc {
namespace {

class KVComposeScorer : public Scorer {
 public:
  KVComposeScorer(int64_t task_tokens, int64_t kernel) : task_tokens_(task_tokens), kernel_(kernel) {}
  AttentionProbe probe() const override { return {false, task_tokens_}; }
  at::Tensor score(const ScoreInput& in) const override {
    // Eq. 14–16: max over task tokens, mean over the query heads of a KV group, plus the mean over KV heads.
    const at::Tensor per_head = std::get<0>(in.step->stats.window_probs.max(1));  // [H, S]
    const at::Tensor kv = pool1d(aggregate_heads(per_head, in.num_kv_heads, in.agg), kernel_);
    return kv + kv.mean(0, /*keepdim=*/true);
  }

 private:
  int64_t task_tokens_, kernel_;
};

PressConfig build(const PressParams& p, Allocation allocation) {
  p.check_known_keys({"task", "window", "kernel", "floor", "first_layer_max", "agg", "heads"});
  const std::string task = p.get_string("task", "window");
  KVC_CHECK(task == "window" || task == "all", "--press {}: task must be window (the last `window` prompt tokens) "
            "or all (the context itself), got '{}'", p.name, task);
  const int64_t window = p.get_int("window", 32);
  KVC_CHECK(window >= 1, "--press {}: window must be >= 1", p.name);
  PressConfig c;
  // task=all: every prompt token is a task token (probe windows are clamped to the prompt length).
  // kernel: average pooling of each head's scores along the sequence, as SnapKV's. Not in the paper
  // (kernel=1 is the paper's and kvpress' scoring), but without it a multi-token fact loses the tokens
  // the question does not attend to directly: on kvc-tiny-lm's needle grid (ratio 0.5, question seen)
  // kernel=1 keeps 0.25 of the answers, kernel=5 0.85, SnapKV 0.725 (and SnapKV with kernel=1 0.175).
  const int64_t kernel = p.get_int("kernel", 5);
  KVC_CHECK(kernel >= 1 && kernel % 2 == 1, "--press {}: kernel must be odd and >= 1, got {}", p.name, kernel);
  c.scorer = std::make_shared<KVComposeScorer>(task == "all" ? std::numeric_limits<int64_t>::max() / 2 : window, kernel);
  // The paper compresses the context and then asks the task; when the task tokens (the question) end
  // the compressed prompt they must survive, as SnapKV's window does: protected in each layer's own
  // selection, but ranked by their scores in the global allocation (no floor of `window` per layer).
  c.protect_recent = task == "window" ? window : 0;
  // floor: entries every layer keeps at least (kvpress' keep_token_lower_bound; the paper has none).
  c.kvcompose_floor = p.get_int("floor", 0);
  KVC_CHECK(c.kvcompose_floor >= 0, "--press {}: floor must be >= 0", p.name);
  // first_layer_max=1: the first layer's composite scores are the maximum over layers, so it gets the
  // largest budget (kvpress does this; the paper does not).
  c.kvcompose_first_layer_max = p.get_int("first_layer_max", 0) != 0;
  c.allocation = allocation;
  return c;
}

}  // namespace

void register_kvcompose() {
  register_method("kvcompose", "composite tokens pooled over all layers set layer budgets (task=window|all,window=32,kernel=5)",
                  [](const PressParams& p) { return build(p, Allocation::KVCompose); });
  register_method("kvcompose_unstructured", "KVCompose with per-(layer, head) budgets (CSR cache)",
                  [](const PressParams& p) { return build(p, Allocation::KVComposeUnstructured); });
}

}  // namespace kvc
