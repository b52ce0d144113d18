#include "press/press_observer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "util/error.h"

namespace kvc {
namespace {

bool deferred(Allocation a) {
  return a == Allocation::KVCompose || a == Allocation::KVComposeUnstructured || a == Allocation::D2O;
}

std::vector<double> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace

PressObserver::PressObserver(std::shared_ptr<const PressConfig> config, ModelShape shape)
    : config_(std::move(config)), shape_(std::move(shape)) {
  const auto L = static_cast<size_t>(shape_.num_layers);
  bound_.assign(L, 0);
  positions_.resize(L);
  cumulative_.resize(L);
  current_.resize(L);
  pending_.resize(L);
  thresholds_.assign(L, -1.0);
  layer_variance_.assign(L, 0.0);
  dyn_scores_.resize(L);
}

void PressObserver::record_kept() {
  recording_ = true;
  record_.reset(shape_.num_layers, shape_.attention.num_kv_heads);
}

void PressObserver::record_merges(int64_t layer, const at::Tensor& merged, const at::Tensor& positions) {
  // Slots -> positions, read before the eviction reorders the storage.
  const at::Tensor rows = merged.to(at::kCPU), pos = positions.to(at::kCPU);
  auto& per_head = record_.merged[static_cast<size_t>(layer)];
  for (int64_t i = 0; i < rows.size(0); ++i) {
    const int64_t h = rows[i][0].item<int64_t>();
    per_head[static_cast<size_t>(h)].emplace_back(pos[h][rows[i][1].item<int64_t>()].item<int64_t>(),
                                                  pos[h][rows[i][2].item<int64_t>()].item<int64_t>());
  }
}

AttentionProbe PressObserver::probe(int64_t layer) const {
  AttentionProbe p;
  if (!prefill_done_) {
    p = config_->scorer->probe();
    if (config_->cumulative || config_->allocation == Allocation::D2O) p.column_sums = true;
  } else if (!config_->bounded || (config_->ratio <= 0 && config_->budget <= 0)) {
    return p;
  } else {
    p.column_sums = config_->cumulative;
  }
  if (config_->current) p.window = std::max<int64_t>(p.window, 1);
  return p;
}

ScoreInput PressObserver::input(int64_t layer, bool prefill, const LayerStep* step) const {
  ScoreInput in;
  in.layer = layer;
  in.prefill = prefill;
  in.step = step;
  const auto l = static_cast<size_t>(layer);
  in.positions = positions_[l];
  in.cumulative = cumulative_[l];
  in.current = current_[l];
  in.budget = bound_[l];
  in.num_heads = shape_.attention.num_heads;
  in.num_kv_heads = shape_.attention.num_kv_heads;
  in.agg = config_->agg;
  return in;
}

void PressObserver::after_attention(const LayerStep& step, KVCache& cache) {
  if (!prefill_done_) {
    prefill_layer(step, cache);
    if (step.layer + 1 == shape_.num_layers) {
      finish_prefill(cache);
      prefill_done_ = true;
      if (recording_) {
        record_.after_prefill = KeptRecord::positions_of(cache);
        record_.prompt_tokens = prompt_len_;
      }
    }
  } else if (config_->bounded && (config_->ratio > 0 || config_->budget > 0)) {
    decode_layer(step, cache);  // no ratio and no budget: keep everything, also while decoding
  }
  if (step.layer + 1 == shape_.num_layers) hold_next_ = false;  // a hold covers one forward pass
}

void PressObserver::prefill_layer(const LayerStep& step, KVCache& cache) {
  KVC_CHECK(cache.next_position() == 0, "--press {}: compression starts with an empty cache (one observer per sequence)",
            config_->name);
  const int64_t l = step.layer, L = shape_.num_layers, KV = shape_.attention.num_kv_heads;
  const int64_t S = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  if (l == 0) {
    prompt_len_ = S;
    const int64_t b = config_->budget > 0 ? config_->budget
                                          : static_cast<int64_t>(std::llround((1.0 - config_->ratio) * S));
    budget_ = std::max<int64_t>(b, 1);
    const std::vector<int64_t> lo(static_cast<size_t>(L), 1), hi(static_cast<size_t>(L), S);
    if (budget_ >= S) {
      // The prompt fits: nothing to evict yet; a bounded press holds every layer to the budget later.
      bound_.assign(static_cast<size_t>(L), budget_);
    } else if (!config_->layer_shares.empty()) {
      bound_ = distribute(config_->layer_shares, budget_ * L, lo, hi);
    } else if (config_->allocation == Allocation::Pyramid && config_->pyramid_kvpress_schedule) {
      bound_ = kvpress_pyramid_budgets(S);
    } else if (config_->allocation == Allocation::Pyramid) {
      // PyramidKV: the non-window budget falls linearly from 2a − a/β (first layer) to a/β (last).
      const int64_t w = std::min(config_->window, budget_);
      const double a = static_cast<double>(budget_ - w), mn = a / config_->pyramid_beta, mx = 2 * a - mn;
      std::vector<double> weights;
      for (int64_t i = 0; i < L; ++i) weights.push_back(L > 1 ? mx - i * (mx - mn) / (L - 1) : a);
      const std::vector<int64_t> zero(static_cast<size_t>(L), 0), room(static_cast<size_t>(L), S - w);
      bound_ = distribute(weights, (budget_ - w) * L, zero, room);
      for (auto& x : bound_) x += w;
    } else {
      bound_.assign(static_cast<size_t>(L), budget_);
    }
  }
  positions_[li] = step.positions.to(at::kLong).unsqueeze(0).expand({KV, S}).contiguous();
  if (step.stats.column_sums.defined()) {
    cumulative_[li] = aggregate_heads(step.stats.column_sums, KV, config_->agg);
    if (config_->allocation == Allocation::D2O) {
      // D2O Eq. 4 / A.9 Eq. 20: the variance of each query head's cumulative-attention sequence,
      // averaged over the layer's heads (variance=head_mean: of the head-averaged sequence instead).
      layer_variance_[li] = config_->d2o_variance_of_head_mean
                                ? cumulative_[li].mean(0).var().item<double>()
                                : step.stats.column_sums.to(at::kDouble).var(1, /*unbiased=*/false).mean().item<double>();
    }
  }
  if (config_->current && step.stats.window_probs.defined()) {
    const at::Tensor w = step.stats.window_probs;
    current_[li] = aggregate_heads(w.select(1, w.size(1) - 1), KV, config_->agg);
  }
  if (budget_ >= S) {
    reserve_bound(l, budget_, cache);
    return;
  }
  if (!config_->layer_shares.empty() || !deferred(config_->allocation)) {
    const at::Tensor importance = config_->scorer->score(input(l, true, &step));
    if (!config_->layer_shares.empty() || config_->allocation == Allocation::Uniform ||
        config_->allocation == Allocation::Pyramid) {
      compress(l, importance, bound_[li], cache);
    } else if (config_->allocation == Allocation::AdaHeads) {
      // Ada-KV: the layer's budget goes to the best entries across all its heads.
      const int64_t total = budget_ * KV;
      if (total < KV * S) {
        // safeguard α: each head first keeps its own top ⌊α · budget⌋ (at least one), then the rest go
        // to the best entries across the layer's heads.
        at::Tensor ranked = importance;
        if (config_->ada_safeguard > 0) {
          const int64_t safe = std::max<int64_t>(1, static_cast<int64_t>(budget_ * config_->ada_safeguard));
          ranked = importance.clone();
          ranked.scatter_(1, std::get<1>(importance.topk(std::min(safe, S), 1)), 8 * kProtected);
        }
        const at::Tensor flat = ranked.reshape({-1});
        const at::Tensor chosen = std::get<1>(flat.topk(total));
        const at::Tensor counts = at::bincount(chosen.div(S, "floor"), {}, KV);
        std::vector<int64_t> keep;
        for (int64_t h = 0; h < KV; ++h) keep.push_back(counts[h].item<int64_t>());
        compress_per_head(l, importance, keep, cache);
      }
    } else if (config_->allocation == Allocation::DynamicKV) {
      // Each layer first keeps up to its maximum budget B_l = (wt − ws) × r_max, plus the window.
      const int64_t ws = std::min(config_->window, budget_);
      const int64_t bmax = std::min<int64_t>(S - ws, std::llround((budget_ - ws) * config_->dyn_rmax));
      dyn_scores_[li] = importance;  // every entry of the layer, for the global top-k
      const at::Tensor kept = compress(l, importance, bmax + ws, cache);
      pending_[li] = importance.gather(1, kept);
      bound_[li] = kept.size(1);
      if ((l + 1) % config_->dyn_interval == 0 || l + 1 == L) dynamickv_update(l, cache);
    }
  } else if (config_->allocation != Allocation::D2O) {
    pending_[li] = config_->scorer->score(input(l, true, &step));  // KVCompose: needs every layer first
  }
}

void PressObserver::dynamickv_update(int64_t layer, KVCache& cache) {
  // DynamicKV Alg. 1, Update_Buffer_Length: the global top-k, k = (wt − ws) · H · l, over every scored
  // (non-window) entry of the layers seen so far, counted per layer (line 6); Z = B^l · count / max
  // (line 8); normalised so the budgets sum to (wt − ws) · L (lines 9–10). Early on that total is
  // spread over fewer layers, so intermediate updates rarely shrink a layer, and a layer trimmed by an
  // earlier update may be given more again (up to the entries it still holds).
  const int64_t seen = layer + 1, L = shape_.num_layers, KV = shape_.attention.num_kv_heads;
  const int64_t ws = std::min(config_->window, budget_), a = budget_ - ws;
  std::vector<at::Tensor> pooled;
  std::vector<int64_t> sizes;
  for (int64_t i = 0; i < seen; ++i) {
    const at::Tensor s = dyn_scores_[static_cast<size_t>(i)];
    const at::Tensor scored = s.masked_select(s < kProtected);
    pooled.push_back(scored);
    sizes.push_back(scored.numel());
  }
  const at::Tensor all = at::cat(pooled);
  const int64_t k = std::min<int64_t>(a * KV * seen, all.numel());
  if (k <= 0) return;
  const at::Tensor chosen = std::get<1>(all.topk(k));
  at::Tensor layer_of = at::empty({all.numel()}, at::kLong);
  int64_t off = 0;
  for (int64_t i = 0; i < seen; ++i) {
    layer_of.narrow(0, off, sizes[static_cast<size_t>(i)]).fill_(i);
    off += sizes[static_cast<size_t>(i)];
  }
  const std::vector<double> counts = to_vector(at::bincount(layer_of.index_select(0, chosen), {}, seen));
  const double max_count = *std::max_element(counts.begin(), counts.end());
  const int64_t bmax = std::llround(a * config_->dyn_rmax);
  std::vector<double> weights;
  std::vector<int64_t> lo, held;
  for (int64_t i = 0; i < seen; ++i) {
    const auto ii = static_cast<size_t>(i);
    weights.push_back(max_count > 0 ? bmax * counts[ii] / max_count : 0.0);
    lo.push_back(0);
    held.push_back(bound_[ii] - std::min(ws, bound_[ii]));
  }
  // Z' = Z · (wt − ws) · L / ΣZ, capped by what each layer still holds (the excess goes to the others).
  const int64_t room = std::accumulate(held.begin(), held.end(), int64_t{0});
  const std::vector<int64_t> budgets = distribute(weights, std::min(a * L, room), lo, held);
  for (int64_t i = 0; i < seen; ++i) {
    const auto ii = static_cast<size_t>(i);
    const int64_t keep = budgets[ii] + std::min(ws, bound_[ii]);
    const at::Tensor kept = compress(i, pending_[ii], keep, cache);
    pending_[ii] = pending_[ii].gather(1, kept);
    bound_[ii] = keep;
  }
  if (seen == L) {  // the last update sets the final budgets
    for (auto& p : pending_) p = at::Tensor();
    for (auto& p : dyn_scores_) p = at::Tensor();
  }
}

std::vector<int64_t> PressObserver::kvpress_pyramid_budgets(int64_t S) const {
  // kvpress' PyramidKV budgets: the whole budget B = S·(1 − r) (window included) falls
  // linearly from 2B − B/β to B/β; uniform when that would leave a layer less than the window. Python's
  // round() is half-to-even, as nearbyint.
  const int64_t L = shape_.num_layers;
  const double kept = config_->budget > 0 ? static_cast<double>(config_->budget) : S * (1.0 - config_->ratio);
  const double w = static_cast<double>(config_->window);
  double min_num = kept / config_->pyramid_beta, max_num = 2 * kept - min_num;
  if (max_num >= S - w) {
    max_num = S - w;
    min_num = 2 * kept - max_num;
  }
  std::vector<int64_t> out;
  const bool uniform = !(S >= max_num && max_num >= min_num && min_num >= w);
  const double steps = L > 1 ? (max_num - min_num) / static_cast<double>(L - 1) : 0.0;
  for (int64_t l = 0; l < L; ++l) {
    const double b = uniform ? std::max(1.0, std::nearbyint(kept)) : std::nearbyint(max_num - static_cast<double>(l) * steps);
    out.push_back(static_cast<int64_t>(b));
  }
  return out;
}

std::vector<double> PressObserver::d2o_layer_weights() const {
  // D2O Eq. 5: the inverse-variance softmax α_l = exp(1/σ²_l) / Σ_j exp(1/σ²_j): dense (low-variance)
  // layers get more of the total. layers=scaled: exp(τ · (1/σ²_l) / mean_j(1/σ²_j)) instead.
  std::vector<double> inv;
  for (double var : layer_variance_) inv.push_back(1.0 / std::max(var, 1e-12));
  const double mean_inv = std::accumulate(inv.begin(), inv.end(), 0.0) / static_cast<double>(inv.size());
  std::vector<double> logits;
  for (double v : inv) logits.push_back(config_->d2o_scaled_softmax ? config_->d2o_tau * v / mean_inv : v);
  const double mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> w;
  for (double x : logits) w.push_back(std::exp(x - mx));  // shifted by the max: same softmax, no overflow
  return w;
}

void PressObserver::finish_prefill(KVCache& cache) {
  if (budget_ >= prompt_len_ || !config_->layer_shares.empty() || !deferred(config_->allocation)) return;
  const int64_t L = shape_.num_layers, KV = shape_.attention.num_kv_heads, S = prompt_len_;
  const int64_t total = budget_ * L;
  if (config_->allocation == Allocation::D2O) {
    bound_ = distribute(d2o_layer_weights(), total, std::vector<int64_t>(static_cast<size_t>(L), 1),
                        std::vector<int64_t>(static_cast<size_t>(L), S));
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor importance = config_->scorer->score(input(l, true, nullptr));
      compress(l, importance, bound_[static_cast<size_t>(l)], cache);
    }
    return;
  }
  // KVCompose: the allocation ranks the raw scores; the task tokens are protected only in each layer's
  // own selection (a layer whose budget is below them keeps the newest).
  const auto selection = [&](int64_t l) {
    const at::Tensor& raw = pending_[static_cast<size_t>(l)];
    return config_->protect_recent > 0 ? protect_ends(raw, 0, config_->protect_recent) : raw;
  };
  const double floor_bonus = 1e9;  // kvpress' keep_token_lower_bound: the first `floor` composites always win
  if (config_->allocation == Allocation::KVCompose) {
    // Eq. 17–19: composite token k of a layer = every head's k-th best entry; its score is the mean over heads.
    at::Tensor composite = at::empty({L, S}, pending_[0].options());
    for (int64_t l = 0; l < L; ++l) {
      composite[l] = std::get<0>(pending_[static_cast<size_t>(l)].sort(-1, /*descending=*/true)).mean(0);
    }
    if (config_->kvcompose_floor > 0) composite.narrow(1, 0, std::min(config_->kvcompose_floor, S)).add_(floor_bonus);
    if (config_->kvcompose_first_layer_max) composite[0] = std::get<0>(composite.max(0));
    // Eq. 20–22: the global top B_total of the pooled composites; a layer's budget is its count.
    const at::Tensor chosen = std::get<1>(composite.reshape({-1}).topk(std::min(total, L * S)));
    const std::vector<double> counts = to_vector(at::bincount(chosen.div(S, "floor"), {}, L));
    for (int64_t l = 0; l < L; ++l) {
      bound_[static_cast<size_t>(l)] = std::max<int64_t>(1, static_cast<int64_t>(counts[static_cast<size_t>(l)]));
      compress(l, selection(l), bound_[static_cast<size_t>(l)], cache);
    }
  } else {  // unstructured: per (layer, head) budgets from the pooled per-head scores
    at::Tensor sorted = at::empty({L, KV, S}, pending_[0].options());
    for (int64_t l = 0; l < L; ++l) sorted[l] = std::get<0>(pending_[static_cast<size_t>(l)].sort(-1, true));
    if (config_->kvcompose_floor > 0) {
      sorted.narrow(2, 0, std::min(config_->kvcompose_floor, S)).add_(floor_bonus);
    }
    const at::Tensor chosen = std::get<1>(sorted.reshape({-1}).topk(std::min(total * KV, sorted.numel())));
    const std::vector<double> counts = to_vector(at::bincount(chosen.div(S, "floor"), {}, L * KV));
    for (int64_t l = 0; l < L; ++l) {
      std::vector<int64_t> keep;
      for (int64_t h = 0; h < KV; ++h) keep.push_back(static_cast<int64_t>(counts[static_cast<size_t>(l * KV + h)]));
      compress_per_head(l, selection(l), keep, cache);
    }
  }
  for (auto& p : pending_) p = at::Tensor();
}

void PressObserver::decode_layer(const LayerStep& step, KVCache& cache) {
  const int64_t l = step.layer, KV = shape_.attention.num_kv_heads, T = step.keys.size(1);
  const auto li = static_cast<size_t>(l);
  positions_[li] = at::cat({positions_[li], step.positions.to(at::kLong).unsqueeze(0).expand({KV, T})}, 1);
  const int64_t S = positions_[li].size(1);
  if (config_->cumulative) {
    const at::Tensor now = aggregate_heads(step.stats.column_sums, KV, config_->agg).narrow(1, 0, S);
    cumulative_[li] = at::cat({cumulative_[li], at::zeros({KV, T}, cumulative_[li].options())}, 1) + now;
  }
  if (config_->current) {
    const at::Tensor w = step.stats.window_probs;
    current_[li] = aggregate_heads(w.select(1, w.size(1) - 1), KV, config_->agg).narrow(1, 0, S);
  }
  if (hold_next_) bound_[li] += T;  // prompt continuation: kept whole, the bound grows by its length
  if (S <= bound_[li]) return;
  compress(l, config_->scorer->score(input(l, false, &step)), bound_[li], cache);
}

void PressObserver::reserve_bound(int64_t layer, int64_t bound, KVCache& cache) const {
  // A bounded cache holds `bound` entries + one spare slot for the token being added, reserved once:
  // its resident size never changes and decoding never reallocates.
  if (!config_->bounded) return;
  if (auto* dense = dynamic_cast<DenseLayerCache*>(&cache.layer(layer))) dense->reserve(bound + 1);
}

at::Tensor PressObserver::evict_in_place(DenseLayerCache& dense, const at::Tensor& kept) {
  // A cache one entry over its bound: `kept` (sorted) misses exactly one index per head. The last
  // entry takes that slot instead of the whole cache being copied; returns the new storage order
  // (old index per slot) for the bookkeeping.
  const int64_t KV = kept.size(0), S = kept.size(1) + 1;
  const at::Tensor evicted = S * (S - 1) / 2 - kept.sum(1);
  dense.evict_one(evicted);
  at::Tensor order = at::arange(S - 1, kept.options()).unsqueeze(0).repeat({KV, 1});
  const at::Tensor slot = evicted.clamp_max(S - 2);
  order.scatter_(1, slot.unsqueeze(1), at::where(evicted < S - 1, at::full_like(evicted, S - 1), slot).unsqueeze(1));
  return order;
}

at::Tensor PressObserver::compress(int64_t layer, const at::Tensor& importance, int64_t keep, KVCache& cache) {
  const auto li = static_cast<size_t>(layer);
  const int64_t KV = shape_.attention.num_kv_heads, S = importance.size(1);
  if (keep >= S) {
    reserve_bound(layer, keep, cache);  // nothing to evict yet
    return at::arange(S, importance.options().dtype(at::kLong)).unsqueeze(0).expand({KV, S}).contiguous();
  }
  at::Tensor kept = config_->shared_heads
                        ? top_indices(importance.mean(0, /*keepdim=*/true), keep).expand({KV, keep}).contiguous()
                        : top_indices(importance, keep);
  LayerCache& lc = cache.layer(layer);
  auto* dense = dynamic_cast<DenseLayerCache*>(&lc);
  if (config_->merge && dense != nullptr) {
    at::Tensor merged;
    d2o_merge(*dense, kept, config_->d2o_beta, thresholds_[li], recording_ ? &merged : nullptr);
    if (recording_ && merged.defined()) record_merges(layer, merged, dense->positions());
  }
  if (prefill_done_ && config_->bounded && dense != nullptr && keep == S - 1 && dense->size() == S) {
    kept = evict_in_place(*dense, kept);  // every decode step of a bounded cache
  } else {
    lc.retain(kept);
  }
  reserve_bound(layer, keep, cache);
  if (positions_[li].defined()) positions_[li] = positions_[li].gather(1, kept);
  if (cumulative_[li].defined()) cumulative_[li] = cumulative_[li].gather(1, kept);
  if (current_[li].defined()) current_[li] = current_[li].gather(1, kept);
  return kept;
}

void PressObserver::compress_per_head(int64_t layer, const at::Tensor& importance, const std::vector<int64_t>& keep,
                                      KVCache& cache) {
  const int64_t KV = shape_.attention.num_kv_heads, S = importance.size(1);
  const auto li = static_cast<size_t>(layer);
  bound_[li] = *std::max_element(keep.begin(), keep.end());
  if (std::all_of(keep.begin(), keep.end(), [&](int64_t k) { return k >= S; })) return;
  std::vector<at::Tensor> idx;
  for (int64_t h = 0; h < KV; ++h) idx.push_back(top_indices(importance[h], keep[static_cast<size_t>(h)]));
  LayerCache& lc = cache.layer(layer);
  if (auto* ragged = dynamic_cast<RaggedLayerCache*>(&lc)) {
    ragged->retain_ragged(idx);
  } else if (auto* dense = dynamic_cast<DenseLayerCache*>(&lc)) {
    // Per-head lengths differ: move the layer into the CSR layout, holding only what is kept.
    std::vector<at::Tensor> k, v, p;
    for (int64_t h = 0; h < KV; ++h) {
      const at::Tensor i = idx[static_cast<size_t>(h)].to(dense->keys().device());
      k.push_back(dense->keys()[h].index_select(0, i));
      v.push_back(dense->values()[h].index_select(0, i));
      p.push_back(dense->positions()[h].index_select(0, i));
    }
    auto replacement = std::make_unique<RaggedLayerCache>(shape_.attention, shape_.rope, shape_.options);
    replacement->assign(k, v, p);
    cache.replace_layer(layer, std::move(replacement));
  } else {
    fail("--press {}: per-head budgets need a dense or ragged cache layout; use heads=shared with this cache",
         config_->name);
  }
  // Per-head lengths differ: this press does not evict while decoding, so tracking stops here.
  positions_[li] = cumulative_[li] = current_[li] = at::Tensor();
}

}  // namespace kvc
