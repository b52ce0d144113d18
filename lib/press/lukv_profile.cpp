#include "press/lukv_profile.h"

#include "press/lukv_allocation.h"
#include "press/press.h"
#include "press/projected_values.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/progress.h"

namespace kvc {
namespace {

// In place of the press's allocator: keeps every entry and records each layer's scores.
class RecordingAllocator : public Allocator {
 public:
  explicit RecordingAllocator(std::shared_ptr<std::vector<at::Tensor>> scores) : scores_(std::move(scores)) {}
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    (*scores_)[static_cast<size_t>(step.layer)] = ctx.score(step.layer, &step).to(at::kDouble);
  }

 private:
  std::shared_ptr<std::vector<at::Tensor>> scores_;
};

// The oracle importance [KV, context] of each press layer's context entries, from the attention the
// horizon's queries pay them.
class OracleObserver : public ForwardObserver {
 public:
  OracleObserver(const std::vector<int64_t>& layers, int64_t model_layers, int64_t context, int64_t horizon)
      : press_layer_(static_cast<size_t>(model_layers), -1), context_(context), horizon_(horizon) {
    for (size_t i = 0; i < layers.size(); ++i) press_layer_[static_cast<size_t>(layers[i])] = static_cast<int64_t>(i);
    oracle.resize(layers.size());
  }
  AttentionProbe probe(int64_t layer) const override {
    return press_layer_[static_cast<size_t>(layer)] >= 0 ? AttentionProbe{false, horizon_} : AttentionProbe{};
  }
  void after_attention(const LayerStep& step, KVCache&) override {
    const int64_t l = press_layer_[static_cast<size_t>(step.layer)];
    if (l < 0) return;
    KVC_CHECK(step.output_projection != nullptr, "LU-KV profiling needs the layer's output projection");
    const at::Tensor probs = step.stats.window_probs.narrow(2, 0, context_).to(at::kDouble);  // [H, K, S]
    const int64_t heads = probs.size(0), kv = step.values.size(0);
    const at::Tensor norms =
        projected_value_head_norms(*step.output_projection, step.values.narrow(1, 0, context_), heads, 2);  // [H, S]
    const at::Tensor per_query_head = std::get<0>(probs.max(1)) * norms;
    oracle[static_cast<size_t>(l)] = std::get<0>(per_query_head.view({kv, heads / kv, context_}).max(1));
  }
  std::vector<at::Tensor> oracle;

 private:
  std::vector<int64_t> press_layer_;
  int64_t context_, horizon_;
};

}  // namespace

void LukvProfileOptions::validate() const {
  KVC_CHECK(!press.empty(), "--lukv-press needs a press spec (e.g. expected_attention)");
  KVC_CHECK(windows >= 1, "--windows must be at least 1, got {}", windows);
  KVC_CHECK(context >= 2, "--ctx-size must be at least 2 for LU-KV profiling, got {}", context);
  KVC_CHECK(horizon >= 1, "--lukv-horizon must be at least 1, got {}", horizon);
  KVC_CHECK(sink >= 0 && recent >= 0, "--lukv-sink and --lukv-recent must be >= 0, got {} and {}", sink, recent);
  KVC_CHECK(grid >= 1, "LU-KV's budget grid must have at least one step, got {}", grid);
}

LukvProfile profile_lukv(const LlamaModel& model, const std::vector<int>& ids, const LukvProfileOptions& o) {
  o.validate();
  const ModelConfig& c = model.config();
  const int64_t S = o.context, span = o.context + o.horizon;
  KVC_CHECK(span <= c.max_position_embeddings, "--ctx-size {} + --lukv-horizon {} exceed the model's context {}", S,
            o.horizon, c.max_position_embeddings);
  const int64_t available = static_cast<int64_t>(ids.size()) / span;
  KVC_CHECK(available >= 1, "the profiling text has {} tokens; LU-KV needs at least --ctx-size + --lukv-horizon = {}",
            ids.size(), span);
  LukvProfile out;
  out.windows = std::min(o.windows, available);
  for (int64_t l = 0; l < c.num_layers; ++l)
    if (!c.is_local_layer(l)) out.layers.push_back(l);
  const auto L = static_cast<int64_t>(out.layers.size());

  // The press as it scores a prompt, its allocator replaced by one that records the scores and keeps everything.
  PressParams params = PressParams::parse(o.press);
  params.ratio = 0.5;  // any ratio below 1: the allocator is reached
  PressConfig config = build_method_config(params);
  const auto inner = config.new_allocator();
  KVC_CHECK(!inner->splits_budget() && !config.bounded && !inner->merges() && !config.sizes_itself,
            "--lukv-press {}: LU-KV ranks each head's entries by a prompt-time scorer with uniform budgets (knorm, "
            "keydiff, snapkv, expected_attention, ...); {} allocates or evicts on its own",
            o.press, params.name);
  auto scores = std::make_shared<std::vector<at::Tensor>>(static_cast<size_t>(L));
  config.allocator = [scores] { return std::make_unique<RecordingAllocator>(scores); };
  const CacheSetup setup = make_setup(std::move(config), params, model);

  out.utility = at::zeros({L, c.num_kv_heads, o.grid + 1}, at::kDouble);
  Progress progress("lukv", out.windows, "windows", o.show_progress);
  for (int64_t w = 0; w < out.windows && !interrupted(); ++w) {
    const std::vector<int> window(ids.begin() + w * span, ids.begin() + (w + 1) * span);
    const std::vector<int> context(window.begin(), window.begin() + S);
    {
      KVCache cache = setup.new_cache(model);
      const auto observer = setup.new_observer();
      KVC_CHECK(observer->scoring_tokens(context).empty(),
                "--lukv-press {}: the press feeds tokens of its own to score the prompt; LU-KV profiles "
                "presses that score the prompt alone",
                o.press);
      ForwardOptions fo;
      fo.all_logits = false;
      fo.observer = observer.get();
      model.forward(context, cache, fo);
    }
    OracleObserver oracle(out.layers, c.num_layers, S, o.horizon);
    {
      KVCache cache = model.new_cache();
      ForwardOptions fo;
      fo.all_logits = false;
      fo.observer = &oracle;
      model.forward(window, cache, fo);
    }
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor ranking = protect_ends((*scores)[static_cast<size_t>(l)], o.sink, o.recent);
      out.utility[l] += retained_oracle_share(ranking, oracle.oracle[static_cast<size_t>(l)], o.grid) /
                        static_cast<double>(out.windows);
    }
    progress.advance();
  }
  progress.finish();
  stop_if_interrupted("interrupted; nothing written");
  KVC_CHECK(at::isfinite(out.utility).all().item<bool>(),
            "LU-KV: the utility curves are not finite (NaN or infinity); the model's weights or inputs are broken");
  out.prune = lukv_prune_curve(out.utility.view({L * c.num_kv_heads, o.grid + 1})).view({99, L, c.num_kv_heads});
  return out;
}

}  // namespace kvc
