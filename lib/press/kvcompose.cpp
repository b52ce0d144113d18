// KVCompose (2025): attention-guided composite tokens. Score = max over task tokens of their attention
// to each context token, query heads averaged onto KV heads, plus the mean over heads. The k-th
// composite token of a layer takes each head's k-th best entry and scores the mean over heads; all
// layers' composite scores are pooled and the global top (1 − r) × L × N kept, which sets each
// layer's budget; each head then keeps its own top entries (PressObserver::finish_prefill). The
// unstructured variant pools per-head scores directly, giving per-(layer, head) budgets.
#include <limits>

#include "press/press.h"

namespace kvc {
namespace {

class KVComposeScorer : public Scorer {
 public:
  KVComposeScorer(int64_t task_tokens, bool keep_task_tokens)
      : task_tokens_(task_tokens), keep_task_tokens_(keep_task_tokens) {}
  AttentionProbe probe() const override { return {false, task_tokens_}; }
  at::Tensor score(const ScoreInput& in) const override {
    const at::Tensor per_head = std::get<0>(in.step->stats.window_probs.max(1));  // [H, S]
    const at::Tensor kv = aggregate_heads(per_head, in.num_kv_heads, in.agg);
    const at::Tensor score = kv + kv.mean(0, /*keepdim=*/true);
    // The paper compresses the context and then asks the task; when the task tokens (the question)
    // are the end of the compressed prompt they must survive, as SnapKV's window does.
    return keep_task_tokens_ ? protect_ends(score, 0, task_tokens_) : score;
  }

 private:
  int64_t task_tokens_;
  bool keep_task_tokens_;
};

PressConfig build(const PressParams& p, Allocation allocation) {
  p.check_known_keys({"task", "window", "agg", "heads"});
  const std::string task = p.get_string("task", "window");
  KVC_CHECK(task == "window" || task == "all", "--press {}: task must be window (the last `window` prompt tokens) "
            "or all (the context itself), got '{}'", p.name, task);
  const int64_t window = p.get_int("window", 32);
  KVC_CHECK(window >= 1, "--press {}: window must be >= 1", p.name);
  PressConfig c;
  // task=all: every prompt token is a task token (probe windows are clamped to the prompt length).
  c.scorer = task == "all" ? std::make_shared<KVComposeScorer>(std::numeric_limits<int64_t>::max() / 2, false)
                            : std::make_shared<KVComposeScorer>(window, true);
  c.allocation = allocation;
  return c;
}

}  // namespace

void register_kvcompose() {
  register_method("kvcompose", "composite tokens pooled over all layers set layer budgets (task=window|all,window=32)",
                  [](const PressParams& p) { return build(p, Allocation::KVCompose); });
  register_method("kvcompose_unstructured", "KVCompose with per-(layer, head) budgets (CSR cache)",
                  [](const PressParams& p) { return build(p, Allocation::KVComposeUnstructured); });
}

}  // namespace kvc
