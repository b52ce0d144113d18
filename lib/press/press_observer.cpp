#include "press/press_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"
#include "util/warn_once.h"

namespace kvc {

// The allocator's view of the sequence: the observer's bookkeeping and the cache of the current call.
class PressObserver::Context : public PressContext {
 public:
  Context(PressObserver& observer, KVCache& cache) : o_(observer), cache_(cache) {}

  const ModelShape& shape() const override { return o_.shape_; }
  int64_t prompt_length() const override { return o_.prompt_len_; }
  int64_t budget() const override { return o_.budget_; }
  double target_entries() const override {
    const PressConfig& c = *o_.config_;
    return c.budget > 0 ? static_cast<double>(c.budget) : o_.prompt_len_ * (1.0 - c.ratio);
  }
  int64_t bound(int64_t layer) const override { return o_.bound_[static_cast<size_t>(layer)]; }
  void set_bound(int64_t layer, int64_t entries) override { o_.bound_[static_cast<size_t>(layer)] = entries; }
  const at::Tensor& cumulative(int64_t layer) const override {
    return o_.cumulative_[static_cast<size_t>(layer)].view();
  }
  at::Tensor score(int64_t layer, const LayerStep* step) const override {
    return o_.config_->scorer->score(o_.input(layer, !o_.prefill_done_, step));
  }
  at::Tensor score_own(int64_t layer, const LayerStep& step) const override {
    const int64_t T = step.keys.size(1);
    const at::Tensor positions =
        step.positions.to(at::kLong).unsqueeze(0).expand({o_.shape_.attention.num_kv_heads, T});
    return o_.config_->scorer->score(o_.own_input(layer, step, positions, T));
  }
  at::Tensor compress(int64_t layer, const at::Tensor& importance, int64_t keep) override {
    return o_.compress(layer, importance, keep, cache_);
  }
  void compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep) override {
    o_.compress_per_head(layer, importance, keep, cache_);
  }
  LayerCache& layer_cache(int64_t layer) override { return o_.layer_cache(cache_, layer); }
  void continue_positions_from(int64_t entries) override {
    // The prompt's forward pass advances the cache by the prompt's length once every layer is done (a
    // shared prefill's replay likewise): set back by what was dropped, it ends at `entries`.
    KVC_CHECK(!o_.prefill_done_, "--press {}: positions can only be renumbered while the prompt is compressed",
              o_.config_->name);
    cache_.advance(entries - o_.prompt_len_);
  }
  void replace_layer_cache(int64_t layer, std::unique_ptr<LayerCache> replacement) override {
    cache_.replace_layer(o_.shape_.layers[static_cast<size_t>(layer)], std::move(replacement));
  }

 private:
  PressObserver& o_;
  KVCache& cache_;
};

PressObserver::PressObserver(std::shared_ptr<const PressConfig> config, ModelShape shape)
    : config_(std::move(config)), shape_(std::move(shape)), allocator_(config_->new_allocator()) {
  const auto L = static_cast<size_t>(shape_.num_layers);
  press_layer_.assign(static_cast<size_t>(shape_.model_layers), -1);
  for (size_t i = 0; i < L; ++i) press_layer_[static_cast<size_t>(shape_.layers[i])] = static_cast<int64_t>(i);
  bound_.assign(L, 0);
  positions_.resize(L);
  cumulative_.resize(L);
  current_.resize(L);
  squares_.resize(L);
  passes_since_compression_.assign(L, 0);
  decoding_started_.assign(L, 0);
  decoded_queries_.resize(L);
  decoded_positions_.resize(L);
}

void PressObserver::record_kept() {
  recording_ = true;
  record_.reset(shape_.model_layers, shape_.attention.num_kv_heads);
}

AttentionProbe PressObserver::probe(int64_t model_layer) const {
  AttentionProbe p;
  if (press_layer(model_layer) < 0) return p;
  if (!prefill_done_ || compresses_later_prompt()) {
    p = config_->scorer->probe();
    if (config_->cumulative) p.column_sums = true;
    if (config_->squared) p.group_square_sums = true;
    allocator_->adjust_probe(p);
  } else if (config_->decoding.merge_window > 0) {
    p.column_sums = true;  // CaM weighs its merges by the attention each entry received while decoding
  } else if (!config_->bounded || (config_->ratio <= 0 && config_->budget <= 0)) {
    return p;
  } else {
    p.column_sums = config_->cumulative;
    if (config_->squared) p.group_square_sums = true;
  }
  if (config_->current) p.window = std::max<int64_t>(p.window, 1);
  return p;
}

ScoreInput PressObserver::own_input(int64_t layer, const LayerStep& step, const at::Tensor& positions,
                                    int64_t budget) const {
  ScoreInput in = input(layer, /*prefill=*/true, &step);
  in.positions = positions;
  in.cumulative = at::Tensor();
  in.current = at::Tensor();
  in.cumulative_squares = at::Tensor();
  in.budget = budget;
  return in;
}

ScoreInput PressObserver::input(int64_t layer, bool prefill, const LayerStep* step) const {
  ScoreInput in;
  in.layer = layer;
  in.prefill = prefill;
  in.step = step;
  const auto l = static_cast<size_t>(layer);
  in.positions = positions_[l].view();
  in.cumulative = cumulative_[l].view();
  in.current = current_[l].view();
  in.cumulative_squares = squares_[l].view();
  in.budget = bound_[l];
  in.num_heads = shape_.attention.num_heads;
  in.num_kv_heads = shape_.attention.num_kv_heads;
  in.agg = config_->agg;
  return in;
}

void PressObserver::after_attention(const LayerStep& model_step, KVCache& cache) {
  const bool last_model_layer = model_step.layer + 1 == shape_.model_layers;
  const int64_t layer = press_layer(model_step.layer);
  if (layer >= 0) after_press_layer(model_step, layer, cache);
  if (last_model_layer) hold_next_ = prompt_next_ = false;  // a hold or a prompt mark covers one forward pass
}

void PressObserver::after_press_layer(const LayerStep& model_step, int64_t layer, KVCache& cache) {
  LayerStep step = model_step;  // numbered as the press numbers its layers
  step.layer = layer;
  if (!prefill_done_) {
    prefill_layer(step, cache);
    if (step.layer + 1 == shape_.num_layers) {
      if (budget_ < prompt_len_ || config_->sizes_itself) {
        Context ctx(*this, cache);
        allocator_->finish_prefill(ctx);
      }
      prefill_done_ = true;
      if (recording_) {
        record_.after_prefill = KeptRecord::positions_of(cache);
        record_.prompt_tokens = prompt_len_;
      }
    }
  } else if (config_->decoding.interval > 0) {
    scheduled_decode_layer(step, cache);
  } else if (config_->bounded && (config_->ratio > 0 || config_->budget > 0)) {
    decode_layer(step, cache);  // no ratio and no budget: keep everything, also while decoding
  } else if (allocator_->evicts_while_decoding()) {
    Context ctx(*this, cache);
    allocator_->decode_layer(ctx, step);
  } else if (compresses_later_prompt()) {
    later_prompt_layer(step, cache);
  }
}

bool PressObserver::compresses_later_prompt() const {
  return prefill_done_ && prompt_next_ && !config_->bounded && config_->ratio > 0;
}

void PressObserver::later_prompt_layer(const LayerStep& step, KVCache& cache) {
  const int64_t l = step.layer, KV = shape_.attention.num_kv_heads, T = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  // A layer whose heads keep different numbers of entries (ada) stopped tracking: it keeps later prompts whole.
  if (!positions_[li].defined()) return;
  LayerCache& lc = layer_cache(cache, l);
  const int64_t S = lc.lengths().max().item<int64_t>(), earlier = S - T;
  // Since the last compression the layer only appended (decode steps, then this prompt), in order, at
  // consecutive positions: the bookkeeping catches up with them.
  const int64_t missing = S - positions_[li].length();
  KVC_CHECK(missing >= T, "--press {}: layer {} holds {} entries but tracks {}", config_->name, l, S,
            positions_[li].length());
  const int64_t last = step.positions[T - 1].item<int64_t>();
  positions_[li].append(at::arange(last + 1 - missing, last + 1, at::TensorOptions().dtype(at::kLong)));
  cumulative_[li].reset();  // a prompt-time press reads none of them after its prefill
  current_[li].reset();
  squares_[li].reset();
  // The prompt scored as a prompt of its own: the statistics over its own entries (the last T columns).
  LayerStep own = step;
  if (own.stats.window_probs.defined()) own.stats.window_probs = own.stats.window_probs.narrow(2, earlier, T);
  if (own.stats.column_sums.defined()) own.stats.column_sums = own.stats.column_sums.narrow(1, earlier, T);
  if (own.stats.column_max.defined()) own.stats.column_max = own.stats.column_max.narrow(1, earlier, T);
  if (own.stats.group_square_sums.defined())
    own.stats.group_square_sums = own.stats.group_square_sums.narrow(1, earlier, T);
  const int64_t keep = std::max<int64_t>(1, std::llround((1.0 - config_->ratio) * static_cast<double>(T)));
  const at::Tensor scores =
      config_->scorer->score(own_input(l, own, positions_[li].view().narrow(1, earlier, T), keep));
  KVC_CHECK(scores.dim() == 2 && scores.size(1) == T, "--press {}: scored {} entries of a {}-token prompt",
            config_->name, scores.dim() == 2 ? scores.size(1) : -1, T);
  // What the layer held before always stays.
  const at::Tensor held =
      at::full({KV, earlier}, std::numeric_limits<double>::infinity(), scores.options().dtype(at::kDouble));
  bound_[li] = earlier + keep;
  compress(l, at::cat({held, scores.to(at::kDouble).expand({KV, T})}, 1), earlier + keep, cache);
}

void PressObserver::prefill_layer(const LayerStep& step, KVCache& cache) {
  KVC_CHECK(cache.next_position() == 0,
            "--press {}: compression starts with an empty cache (one observer per sequence)", config_->name);
  const int64_t l = step.layer, L = shape_.num_layers, KV = shape_.attention.num_kv_heads;
  const int64_t S = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  Context ctx(*this, cache);
  if (l == 0) {
    prompt_len_ = S;
    const int64_t b =
        config_->budget > 0 ? config_->budget : static_cast<int64_t>(std::llround((1.0 - config_->ratio) * S));
    budget_ = std::max<int64_t>(b, 1);
    // The prompt fits: nothing to evict yet; a bounded press holds every layer to the budget later.
    bound_ = budget_ >= S ? std::vector<int64_t>(static_cast<size_t>(L), budget_) : allocator_->layer_bounds(ctx);
  }
  positions_[li].assign(step.positions.to(at::kLong).unsqueeze(0).expand({KV, S}));
  if (step.stats.column_sums.defined())
    cumulative_[li].assign(aggregate_heads(step.stats.column_sums, KV, config_->agg));
  if (config_->current && step.stats.window_probs.defined()) {
    const at::Tensor w = step.stats.window_probs;
    current_[li].assign(aggregate_heads(w.select(1, w.size(1) - 1), KV, config_->agg));
  }
  if (config_->squared && step.stats.group_square_sums.defined())
    squares_[li].assign(step.stats.group_square_sums.narrow(1, 0, S));
  if (budget_ >= S && !config_->sizes_itself) {
    reserve_bound(l, budget_, cache);
    return;
  }
  allocator_->prefill_layer(ctx, step);
}

void PressObserver::decode_layer(const LayerStep& step, KVCache& cache) {
  const int64_t l = step.layer, KV = shape_.attention.num_kv_heads, T = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  // The same positions for every head.
  positions_[li].append(step.positions.scalar_type() == at::kLong ? step.positions : step.positions.to(at::kLong));
  const int64_t S = positions_[li].length();
  if (config_->cumulative) {
    cumulative_[li].append_zeros(T);
    aggregate_heads_into(step.stats.column_sums, config_->agg, cumulative_[li].view(), /*accumulate=*/true);
  }
  if (config_->current) {
    const at::Tensor w = step.stats.window_probs;
    if (current_[li].length() == S - T) {
      current_[li].append_zeros(T);  // then overwritten: the newest query's attention replaces the rows
      aggregate_heads_into(w.select(1, w.size(1) - 1), config_->agg, current_[li].view(), /*accumulate=*/false);
    } else {
      current_[li].assign(aggregate_heads(w.select(1, w.size(1) - 1), KV, config_->agg).narrow(1, 0, S));
    }
  }
  if (config_->squared && squares_[li].length() == S - T && step.stats.group_square_sums.defined()) {
    squares_[li].append_zeros(T);
    squares_[li].view().add_(step.stats.group_square_sums.narrow(1, 0, S));
  } else if (config_->squared) {
    squares_[li].reset();  // out of step with the cache: the scorer says so instead of reading stale rows
  }
  if (hold_next_) bound_[li] += T;  // prompt continuation: kept whole, the bound grows by its length
  if (S <= bound_[li]) return;
  compress(l, config_->scorer->score(input(l, false, &step)), bound_[li], cache);
}

void PressObserver::reserve_bound(int64_t layer, int64_t bound, KVCache& cache) const {
  // A bounded cache holds `bound` entries + one spare slot for the token being added, reserved once:
  // its resident size never changes and decoding never reallocates. A bound past the model's context
  // (--budget 100000000) reserves only the context: a sequence that outgrows it grows the cache as an
  // uncompressed one does, instead of allocating for entries no run feeds.
  if (!config_->bounded) return;
  const int64_t room = shape_.context > 0 ? std::min(bound, shape_.context) : bound;
  layer_cache(cache, layer).reserve(room + 1);
}

at::Tensor PressObserver::compress(int64_t layer, const at::Tensor& importance, int64_t keep, KVCache& cache) {
  const auto li = static_cast<size_t>(layer);
  const int64_t KV = shape_.attention.num_kv_heads, S = importance.size(1);
  if (keep >= S) {
    reserve_bound(layer, keep, cache);  // nothing to evict yet
    return at::arange(S, importance.options().dtype(at::kLong)).unsqueeze(0).expand({KV, S}).contiguous();
  }
  if (!prefill_done_) warn_if_fewer_than_protected(layer, importance, keep);
  LayerCache& lc = layer_cache(cache, layer);
  const at::Tensor ranked = config_->shared_heads ? importance.mean(0, /*keepdim=*/true) : importance;
  if (prefill_done_ && config_->bounded && keep == S - 1) {
    // Every decode step of a bounded cache evicts one entry per head, the least important, found in one
    // pass (not a top-k of S - 1 and a sort): the layout moves each head's last entry into the freed
    // slot, and the bookkeeping rows make the same move.
    const at::Tensor slots = row_argmin(ranked).expand({KV}).contiguous();
    at::Tensor order;  // the new storage order, built only where something reads it
    if (allocator_->merges() || recording_) {
      order = swap_order(slots, S);
      allocator_->before_evict(shape_.layers[li], lc, order, recording_ ? &record_ : nullptr);
    }
    lc.evict_one(slots);
    std::vector<int64_t> per_head;
    if (slots.is_cpu()) per_head.assign(slots.data_ptr<int64_t>(), slots.data_ptr<int64_t>() + KV);
    for (TrackedRows* rows : {&positions_[li], &cumulative_[li], &current_[li], &squares_[li]}) {
      if (!rows->defined()) continue;
      if (slots.is_cpu() && rows->view().is_cpu()) {
        rows->swap_remove(per_head);  // O(1) per head
        continue;
      }
      if (!order.defined()) order = swap_order(slots, S);
      rows->reorder(order.to(rows->view().device()));
    }
    reserve_bound(layer, keep, cache);
    return order;
  }
  const at::Tensor kept = top_indices(ranked, keep).expand({KV, keep}).contiguous();
  allocator_->before_evict(shape_.layers[li], lc, kept, recording_ ? &record_ : nullptr);
  lc.retain(kept);
  reserve_bound(layer, keep, cache);
  for (TrackedRows* rows : {&positions_[li], &cumulative_[li], &current_[li], &squares_[li]})
    if (rows->defined()) rows->reorder(kept);
  return kept;
}

void PressObserver::compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep,
                                      KVCache& cache) {
  const int64_t KV = shape_.attention.num_kv_heads, S = importance.size(1);
  const auto li = static_cast<size_t>(layer);
  bound_[li] = *std::max_element(keep.begin(), keep.end());
  if (std::all_of(keep.begin(), keep.end(), [&](int64_t k) { return k >= S; })) return;
  // Heads keep different numbers: each head's own count against its own protected entries.
  const at::Tensor protected_per_head = (importance >= kProtected).sum(1).to(at::kLong).cpu();
  for (int64_t h = 0; h < KV; ++h) {
    if (protected_per_head[h].item<int64_t>() > keep[static_cast<size_t>(h)]) {
      warn_if_fewer_than_protected(layer, importance.narrow(0, h, 1), keep[static_cast<size_t>(h)]);
      break;
    }
  }
  std::vector<at::Tensor> idx;
  for (int64_t h = 0; h < KV; ++h) idx.push_back(top_indices(importance[h], keep[static_cast<size_t>(h)]));
  cache.retain_per_head(shape_.layers[li], idx);
  // Per-head lengths differ: this press does not evict while decoding, so tracking stops here.
  positions_[li].reset();
  cumulative_[li].reset();
  current_[li].reset();
  squares_[li].reset();
}

void PressObserver::warn_if_fewer_than_protected(int64_t layer, const at::Tensor& importance, int64_t keep) const {
  // The sinks and the recent window are what a method keeps whatever the scores say; a budget below
  // them leaves only the newest part of the window and the method's selection never runs.
  const int64_t protected_entries = (importance >= kProtected).sum(1).max().item<int64_t>();
  if (keep >= protected_entries) return;
  warn_once(
      "press-below-protected:" + config_->name,
      fmt::format("--press {} keeps {} of the {} prompt entries per KV head in layer {}, fewer than the {} it "
                  "always keeps (sinks and recent window): it drops part of that window and does not select "
                  "at all, so the output degrades. Keep more (a lower --ratio, or --budget {} or more) or "
                  "give the press a smaller window ({}:window=N where it takes one).",
                  config_->name, keep, importance.size(1), layer, protected_entries, protected_entries, config_->name));
}

}  // namespace kvc
