// ThinK (Xu et al. 2024, arXiv:2407.21018): key channels pruned per KV head. A channel's score is the mean
// square of the last `window` queries on it (rotated, averaged over the KV group's query heads) times the mean
// square of the prompt's keys on it (rotated, as the cache holds them); the int(d · channels) lowest channels
// of each head are dropped from the prompt's keys. kvpress' ThinKPress zeroes them in place (no memory
// saved); kvc stores the kept channels only (channel_pruned_cache.h), so the keys of the prompt take
// (1 − channels) of their bytes. Entries added later keep every channel, as kvpress prunes the prompt only.
// base=PRESS first evicts tokens under --ratio/--budget (kvpress' ComposedPress([press, ThinKPress])).
#include "cache/dense_layer_cache.h"
#include "press/channel_pruned_cache.h"
#include "press/press.h"

namespace kvc {
namespace {

// Without a base no token is evicted: every entry scores the same and nothing reads the scores.
class NoTokenScorer : public Scorer {
 public:
  at::Tensor score(const ScoreInput& in) const override {
    return at::zeros(in.positions.sizes(), in.positions.options().dtype(at::kDouble));
  }
};

class ThinKAllocator : public Allocator {
 public:
  ThinKAllocator(std::unique_ptr<Allocator> base, double channels, int64_t window)
      : base_(std::move(base)), channels_(channels), window_(window) {}

  void adjust_probe(AttentionProbe& probe) const override {
    if (base_) base_->adjust_probe(probe);
  }
  std::vector<int64_t> layer_bounds(const PressContext& ctx) override {
    return base_ ? base_->layer_bounds(ctx) : Allocator::layer_bounds(ctx);
  }
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    const int64_t l = step.layer;
    query_energy_.resize(static_cast<size_t>(ctx.shape().num_layers));
    query_energy_[static_cast<size_t>(l)] = window_query_energy(ctx, step);
    if (evicts_tokens(ctx)) base_->prefill_layer(ctx, step);
    // A base that allocates over layers compresses them at the end of the prefill: the channels follow then.
    if (!evicts_tokens(ctx) || !base_->splits_budget()) prune(ctx, l);
  }
  void finish_prefill(PressContext& ctx) override {
    if (!evicts_tokens(ctx)) return;
    base_->finish_prefill(ctx);
    if (base_->splits_budget())
      for (int64_t l = 0; l < ctx.shape().num_layers; ++l) prune(ctx, l);
  }
  void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) override {
    if (base_) base_->before_evict(layer, cache, kept, record);
  }
  bool splits_budget() const override { return base_ && base_->splits_budget(); }
  bool merges() const override { return base_ && base_->merges(); }

 private:
  bool evicts_tokens(const PressContext& ctx) const { return base_ && ctx.budget() < ctx.prompt_length(); }

  // Mean square of the window's rotated queries per channel, averaged over each KV group: [n_kv, d].
  at::Tensor window_query_energy(const PressContext& ctx, const LayerStep& step) const {
    KVC_CHECK(step.queries.defined(), "--press think: the model gave layer {} no queries", step.layer);
    const int64_t H = step.queries.size(0), T = step.queries.size(1), d = step.queries.size(2);
    const int64_t w = std::min(window_, T), KV = ctx.shape().attention.num_kv_heads;
    const at::Tensor q = step.queries.narrow(1, T - w, w).to(at::kDouble);
    return q.pow(2).mean(1).view({KV, H / KV, d}).mean(1);
  }

  void prune(PressContext& ctx, int64_t l) {
    LayerCache& layer = ctx.layer_cache(l);
    auto* dense = dynamic_cast<DenseLayerCache*>(&layer);
    KVC_CHECK(dense != nullptr && dense->can_merge(),
              "--press think: stores a subset of key channels from the dense cache of floating-point rows; layer {} "
              "is '{}'",
              l, layer.layout());
    const at::Tensor keys = dense->keys();  // rotated [n_kv, n, d]
    const int64_t KV = keys.size(0), n = keys.size(1), d = keys.size(2);
    const int64_t pruned = static_cast<int64_t>(static_cast<double>(d) * channels_);
    if (pruned == 0 || n == 0) return;
    const at::Tensor score =
        query_energy_[static_cast<size_t>(l)].to(keys.device()) * keys.to(at::kDouble).pow(2).mean(1);
    const at::Tensor kept = std::get<0>(std::get<1>(score.topk(d - pruned, 1)).sort(1)).contiguous();  // [n_kv, c]
    at::Tensor kept_keys = keys.gather(2, kept.unsqueeze(1).expand({KV, n, d - pruned})).contiguous();
    at::Tensor values = dense->values().clone(), positions = dense->positions().clone();
    // The emptied dense layer becomes the tail that takes later entries, with the model's RoPE and types.
    dense->retain(at::empty({KV, 0}, at::TensorOptions().dtype(at::kLong)));
    std::unique_ptr<LayerCache> tail = dense->clone();
    auto* tail_dense = dynamic_cast<DenseLayerCache*>(tail.get());
    tail.release();
    ctx.replace_layer_cache(l, std::make_unique<ChannelPrunedLayerCache>(ctx.shape().attention, std::move(kept_keys),
                                                                         kept, std::move(values), std::move(positions),
                                                                         std::unique_ptr<DenseLayerCache>(tail_dense)));
  }

  std::unique_ptr<Allocator> base_;  // null: no token eviction
  double channels_;
  int64_t window_;
  std::vector<at::Tensor> query_energy_;
};

PressConfig build(const PressParams& p) {
  const double channels = p.get_double("channels", 0.0);
  KVC_CHECK(channels >= 0 && channels < 1,
            "--press {}: channels (the share of key channels pruned) must be in [0, 1), "
            "got {}",
            p.name, channels);
  const int64_t window = p.get_int("window", 32);
  KVC_CHECK(window >= 1, "--press {}: window must be >= 1, got {}", p.name, window);
  PressConfig c;
  AllocatorFactory base_allocator;
  if (p.values.count("base") != 0) {
    PressParams base = base_press_params(p, "", {"channels", "window"});
    if (p.values.count("base_window") != 0) {
      base.values["window"] = p.values.at("base_window");
      base.values.erase("base_window");
    }
    c = build_method_config(base);
    base_allocator = c.allocator ? c.allocator : [] { return std::make_unique<Allocator>(); };
    KVC_CHECK(!base_allocator()->per_head_budgets(),
              "--press {}: base={} keeps different numbers of entries per head, which the channel-pruned layout cannot",
              p.name, base.name);
    c.bounded = false;  // the prompt's tokens, then its channels; nothing evicted while decoding
  } else {
    p.check_known_keys({"channels", "window", "agg", "heads"});
    KVC_CHECK(p.ratio == 0 && p.budget == 0,
              "--press {}: prunes key channels (channels=); --ratio/--budget need "
              "base=PRESS to also evict tokens",
              p.name);
    c.scorer = std::make_shared<NoTokenScorer>();
  }
  c.sizes_itself = true;
  c.allocator = [base_allocator, channels, window] {
    return std::make_unique<ThinKAllocator>(base_allocator ? base_allocator() : nullptr, channels, window);
  };
  return c;
}

}  // namespace

void register_think() {
  register_method("think",
                  "key channels pruned per head by window-query x key energy, stored without them (ThinK, "
                  "arXiv:2407.21018; channels=0 as kvpress: set it, window=32, base= to also evict tokens)",
                  build, /*sizes_itself=*/true);
}

}  // namespace kvc
