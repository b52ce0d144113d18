// KeyRerotation (kvpress' KeyRerotationPress; the re-rotation of SinkCache and FINCH): after a base press
// compressed a layer at prefill, its kept entries take the continuous positions 0..n−1, each key rotated by
// RoPE from its original position p to its new one (k' = R(i − p) k, done as R(i) R(p)⁻¹ k in float64).
// kvc's cache stores rotated keys with their positions, so the positions are rewritten with the keys, and the
// tokens fed after the prompt continue from n (the first compressed layer's count), as kvpress' pipeline feeds
// the question at the compressed cache's length after re-rotation; attention masks by position, which the
// re-rotation leaves in order.
// A model with layers the press leaves alone (Gemma 3's sliding-window layers, which hold the prompt's last
// window at its own positions) cannot renumber the sequence: its windows would sit after the next token and be
// masked. There the kept entries take the continuous positions P−n..P−1 that end where the prompt ended, and
// the tokens fed after it continue from P: every distance between a new query and a kept key is the one the
// renumbering gives (RoPE and the causal mask read only distances), and the windows keep theirs.
// Only the prompt's compression re-rotates (a later prompt of a conversation is compressed as the base does).
// Usage: key_rerotation:base=snapkv,window=16 (other keys go to the base).
#include "cache/dense_layer_cache.h"
#include "core/rope.h"
#include "press/press.h"

namespace kvc {
namespace {

// Rewrites a dense layer's keys and positions so that head h's i-th entry sits at position i (P − n + i with
// keep_prompt_end, P the prompt's length); returns the entries per head.
int64_t rerotate(LayerCache& layer, const Rope& rope, int64_t prompt_length, bool keep_prompt_end) {
  auto* dense = dynamic_cast<DenseLayerCache*>(&layer);
  KVC_CHECK(dense != nullptr, "--press key_rerotation: rewrites keys in the dense cache; this layer's layout is '{}'",
            layer.layout());
  KVC_CHECK(dense->can_merge(),
            "--press key_rerotation (also finch, which re-rotates unless rerotate=0): re-rotated keys are rewritten "
            "in place, which a cache of blocks (q8_0, q4_0: rows sharing one scale) cannot take; use "
            "--cache-type-k/-v f16, bf16 or f32, or finch:rerotate=0");
  const at::Tensor old_positions = dense->positions();
  const int64_t KV = old_positions.size(0), n = old_positions.size(1);
  const int64_t first = keep_prompt_end ? prompt_length - n : 0;
  const at::Tensor positions =
      at::arange(first, first + n, old_positions.options()).unsqueeze(0).expand({KV, n}).contiguous();
  const at::Tensor keys = dense->keys();
  const at::Tensor prerope = rope.unapply(keys.to(at::kDouble), old_positions);
  const at::Tensor rotated = rope.apply(prerope, positions).to(keys.scalar_type());
  dense->assign(rotated, dense->values().clone(), positions);
  return n;
}

// Delegates everything to the base allocator and re-rotates each layer once the base compressed it. The
// observer's own bookkeeping keeps the original positions: it only orders a layer's entries, which the
// re-rotation does not change.
class RerotatingAllocator : public Allocator {
 public:
  explicit RerotatingAllocator(std::unique_ptr<Allocator> base) : base_(std::move(base)) {}

  void adjust_probe(AttentionProbe& probe) const override { base_->adjust_probe(probe); }
  std::vector<int64_t> layer_bounds(const PressContext& ctx) override { return base_->layer_bounds(ctx); }
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    ropes_.resize(static_cast<size_t>(ctx.shape().num_layers), nullptr);
    KVC_CHECK(step.rope != nullptr, "--press key_rerotation: the model gave layer {} no RoPE", step.layer);
    ropes_[static_cast<size_t>(step.layer)] = step.rope;
    base_->prefill_layer(ctx, step);
    if (!base_->splits_budget()) note(step.layer, rerotate_layer(ctx, step.layer, *step.rope));
  }
  void finish_prefill(PressContext& ctx) override {
    base_->finish_prefill(ctx);
    // A base that allocates over layers compresses them only now.
    if (base_->splits_budget())
      for (int64_t l = 0; l < ctx.shape().num_layers; ++l)
        note(l, rerotate_layer(ctx, l, *ropes_[static_cast<size_t>(l)]));
    // The tokens fed after the prompt continue from the first compressed layer's count, as kvpress' pipeline
    // continues from the cache's length after re-rotation (its layer 0's); with layers left alone, from P.
    if (first_layer_entries_ >= 0 && !keeps_prompt_end(ctx)) ctx.continue_positions_from(first_layer_entries_);
  }
  void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) override {
    base_->before_evict(layer, cache, kept, record);
  }
  bool splits_budget() const override { return base_->splits_budget(); }
  bool per_head_budgets() const override { return false; }
  bool merges() const override { return base_->merges(); }

 private:
  static bool keeps_prompt_end(const PressContext& ctx) { return ctx.shape().model_layers > ctx.shape().num_layers; }
  static int64_t rerotate_layer(PressContext& ctx, int64_t layer, const Rope& rope) {
    return rerotate(ctx.layer_cache(layer), rope, ctx.prompt_length(), keeps_prompt_end(ctx));
  }
  void note(int64_t layer, int64_t entries) {
    if (layer == 0) first_layer_entries_ = entries;
  }

  std::unique_ptr<Allocator> base_;
  std::vector<const Rope*> ropes_;
  int64_t first_layer_entries_ = -1;
};

PressConfig build(const PressParams& p) {
  const PressParams base = base_press_params(p, "snapkv", {});
  PressConfig c = build_method_config(base);
  const AllocatorFactory inner = c.allocator ? c.allocator : [] { return std::make_unique<Allocator>(); };
  KVC_CHECK(!inner()->per_head_budgets(),
            "--press {}: base={} keeps different numbers of entries per head; re-rotation needs one count per head",
            p.name, base.name);
  // A base that evicts while decoding (streaming_llm, h2o) compresses the prompt only, as kvpress' presses do:
  // entries evicted later would leave gaps among the continuous positions.
  c.bounded = false;
  c.allocator = [inner] { return std::make_unique<RerotatingAllocator>(inner()); };
  return c;
}

}  // namespace

void register_key_rerotation() {
  register_method("key_rerotation",
                  "a base press (base=, default snapkv) whose kept keys are re-rotated to the positions 0..n-1 "
                  "(kvpress' KeyRerotationPress)",
                  build);
}

}  // namespace kvc
