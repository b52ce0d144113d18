// D2O (Wan et al. 2024), discriminative operations at two levels:
//  - layers (Eq. 4–5): the variance of each query head's cumulative-attention sequence (column sums
//    of the prompt's attention), averaged over the layer's heads, sets the layer's budget through the
//    inverse-variance softmax α_l = exp(1/σ²_l) / Σ_j exp(1/σ²_j) (D2OAllocator::finish_prefill);
//  - tokens: sinks + a recent window + the top cumulative-attention tokens (important:recent 3:1);
//    each evicted token is merged into its most similar kept token (cosine of keys) when the
//    similarity clears an EMA threshold (Eq. 10: τ_t = β · mean_t + (1 − β) · τ_{t−1}, the current
//    mean of the per-token best similarities weighted β = 0.7; τ starts at the first mean),
//    weighted by similarity with the kept token's own weight highest (e^1); else it is dropped.
// Works during decoding: one eviction (and possibly one merge) per step once over budget.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <vector>

#include <ATen/Parallel.h>

#include "kernels/best_cosine.h"
#include "press/d2o.h"
#include "press/kept_dump.h"
#include "press/press.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

constexpr const char* kMergePurpose = "merge evicted entries into (D2O needs the dense cache)";

// Elements of one block of the merge's similarity matrix (1 MB of float32: it stays in L2).
constexpr int64_t kSimilarityBlockElements = int64_t{1} << 18;

class D2OScorer : public Scorer {
 public:
  D2OScorer(int64_t sinks, double recent) : sinks_(sinks), recent_(recent) {}
  AttentionProbe probe() const override { return {true, 0}; }
  at::Tensor score(const ScoreInput& in) const override {
    return protect_ends(in.cumulative, sinks_, std::llround(recent_ * in.budget), in.positions);
  }

 private:
  int64_t sinks_;
  double recent_;
};

// How the layers share the budget: the paper's rule and the alternatives of its Table 4.
enum class D2OLayers {
  Variance,    // the paper's inverse-variance softmax exp(1/σ²_l)
  Reciprocal,  // Table 4, "Reciprocal of Variance": 1/σ²_l
  ExpDecay,    // Table 4, "Exponential Decay Allocation": exp(−σ²_l)
  Scaled,      // exp(τ · (1/σ²_l) / mean_j(1/σ²_j)) (kvc's, not the paper's)
  Uniform,     // every layer the same budget (Table 4's Uniform, Table 6's "w.o. Layer Operation")
};

struct D2OOptions {
  D2OLayers layers = D2OLayers::Variance;
  bool variance_of_head_mean = false;  // variance of the head-averaged sequence, not per head
  bool merge = true;
  double beta = 0.7;  // EMA weight of the current similarities (Eq. 10)
  double tau = 1.0;   // temperature of the scaled layer softmax (not the paper's)
  // The merge threshold: the EMA of Eq. 10, or a fixed cosine (ema = false) every evicted entry's best
  // similarity is compared with; −∞ merges every evicted entry (Table 6, "w.o. EMA-Threshold").
  bool ema = true;
  double fixed_threshold = 0;
};

class D2OAllocator : public Allocator {
 public:
  explicit D2OAllocator(D2OOptions options) : options_(options) {}

  void adjust_probe(AttentionProbe& probe) const override {
    if (options_.layers != D2OLayers::Uniform) probe.column_sums = true;
  }
  void prefill_layer(PressContext& ctx, const LayerStep& step) override {
    if (options_.layers == D2OLayers::Uniform) return Allocator::prefill_layer(ctx, step);
    // D2O Eq. 4 / A.9 Eq. 20: the variance of each query head's cumulative-attention sequence,
    // averaged over the layer's heads (variance=head_mean: of the head-averaged sequence instead).
    // The layer is compressed once every layer's variance is known (finish_prefill).
    layer_variance_.resize(static_cast<size_t>(ctx.shape().num_layers), 0.0);
    layer_variance_[static_cast<size_t>(step.layer)] =
        options_.variance_of_head_mean
            ? ctx.cumulative(step.layer).mean(0).var().item<double>()
            : step.stats.column_sums.to(at::kDouble).var(1, /*unbiased=*/false).mean().item<double>();
  }
  void finish_prefill(PressContext& ctx) override {
    if (options_.layers == D2OLayers::Uniform) return;
    const int64_t L = ctx.shape().num_layers;
    const std::vector<int64_t> bounds =
        distribute(layer_weights(), ctx.budget() * L, std::vector<int64_t>(static_cast<size_t>(L), 1),
                   std::vector<int64_t>(static_cast<size_t>(L), ctx.prompt_length()));
    for (int64_t l = 0; l < L; ++l) ctx.set_bound(l, bounds[static_cast<size_t>(l)]);
    for (int64_t l = 0; l < L; ++l) ctx.compress(l, ctx.score(l, nullptr), ctx.bound(l));
  }
  void before_evict(int64_t layer, LayerCache& cache, const at::Tensor& kept, KeptRecord* record) override {
    if (!options_.merge) return;
    at::Tensor merged;
    at::Tensor* want = record != nullptr ? &merged : nullptr;
    MergeThreshold& threshold =
        thresholds_.try_emplace(layer, MergeThreshold{options_.ema ? -1.0 : options_.fixed_threshold, {}})
            .first->second;
    if (evicts_one_per_head_on_device(cache, kept)) {
      d2o_merge_one_per_head_on_device(cache, kept, options_.beta, threshold.on_device(kept.device()), want,
                                       options_.ema);
    } else {
      d2o_merge(cache, kept, options_.beta, threshold.on_host(), want, options_.ema);
    }
    if (record != nullptr && merged.defined()) record->add_merges(layer, merged, cache);
  }
  bool splits_budget() const override { return options_.layers != D2OLayers::Uniform; }
  bool merges() const override { return options_.merge; }

 private:
  std::vector<double> layer_weights() const {
    // D2O Eq. 5: the inverse-variance softmax α_l = exp(1/σ²_l) / Σ_j exp(1/σ²_j): dense (low-variance)
    // layers get more of the total. layers=scaled: exp(τ · (1/σ²_l) / mean_j(1/σ²_j)) instead; Table 4's
    // alternatives: layers=reciprocal, 1/σ²_l; layers=exp_decay, exp(−σ²_l).
    std::vector<double> inv;
    for (double var : layer_variance_) inv.push_back(1.0 / std::max(var, 1e-12));
    if (options_.layers == D2OLayers::Reciprocal) return inv;
    if (options_.layers == D2OLayers::ExpDecay) {
      std::vector<double> w;
      const double lo = *std::min_element(layer_variance_.begin(), layer_variance_.end());
      for (double var : layer_variance_) w.push_back(std::exp(lo - var));  // shifted: same proportions
      return w;
    }
    const double mean_inv = std::accumulate(inv.begin(), inv.end(), 0.0) / static_cast<double>(inv.size());
    std::vector<double> logits;
    for (double v : inv) logits.push_back(options_.layers == D2OLayers::Scaled ? options_.tau * v / mean_inv : v);
    const double mx = *std::max_element(logits.begin(), logits.end());
    std::vector<double> w;
    for (double x : logits) w.push_back(std::exp(x - mx));  // shifted by the max: same softmax, no overflow
    return w;
  }

  // A decode step on a device: the merge that never waits for it applies. (The CPU's decode steps take
  // d2o_merge's one-pass kernel; this test costs them nothing.)
  static bool evicts_one_per_head_on_device(LayerCache& cache, const at::Tensor& kept) {
    if (kept.device().is_cpu()) return false;
    const int64_t s = require_mergeable_rows(cache, kMergePurpose).merge_rows().keys.size(1);
    return s > 1 && kept.size(1) == s - 1;
  }

  // A layer's merge threshold (EMA: <0 unset; fixed: its value), on the host or, while decoding on a
  // device, there: a decode step's merge then never waits for the GPU.
  struct MergeThreshold {
    double host = -1.0;
    at::Tensor device;  // 0-dim float64; when defined, the current value
    double& on_host() {
      if (device.defined()) {
        host = device.item<double>();
        device = at::Tensor();
      }
      return host;
    }
    at::Tensor& on_device(at::Device where) {
      if (!device.defined()) device = at::full({}, host, at::TensorOptions().dtype(at::kDouble).device(where));
      return device;
    }
  };

  D2OOptions options_;
  std::vector<double> layer_variance_;            // per layer, from the prefill attention
  std::map<int64_t, MergeThreshold> thresholds_;  // per layer
};

// Eq. 10: the current mean of the best similarities gets the weight β, the history 1 − β ("greater
// weight to more recent"); the first mean starts it (threshold < 0: none yet). A fixed threshold stays.
void update_threshold(double& threshold, double mean_best, double beta, bool ema) {
  if (ema) threshold = threshold < 0 ? mean_best : beta * mean_best + (1 - beta) * threshold;
}

// The decode-step merge (one evicted entry per head) on float32 rows: the target search is one kernel
// pass (kernels/best_cosine.h) instead of a dozen small tensor operations, which cost more than the
// step's attention once the cache is small. Same rule as d2o_merge.
void merge_one_per_head(at::Tensor& keys, at::Tensor& values, const at::Tensor& keep, double beta, double& threshold,
                        at::Tensor* merged, bool ema) {
  const int64_t kv = keys.size(0), s = keys.size(1), d = keys.size(2);
  const at::Tensor evict = s * (s - 1) / 2 - keep.sum(1);  // the one index each sorted row misses
  const std::vector<int64_t> evicted(evict.data_ptr<int64_t>(), evict.data_ptr<int64_t>() + kv);
  float* k = keys.data_ptr<float>();
  float* v = values.data_ptr<float>();
  const int64_t ks0 = keys.stride(0), ks1 = keys.stride(1), vs0 = values.stride(0), vs1 = values.stride(1);
  const at::Tensor probes = keys.gather(1, evict.view({kv, 1, 1}).expand({kv, 1, d})).squeeze(1);
  const BestCosine found = best_cosine_per_head(probes, keys, evicted);
  const std::vector<double>& best = found.similarity;
  const std::vector<int64_t>& target = found.row;
  double mean_best = 0;
  for (double b : best) mean_best += b / static_cast<double>(kv);
  update_threshold(threshold, mean_best, beta, ema);
  std::vector<int64_t> rows;  // (head, evicted, slot) of each merge
  const double own = std::exp(1.0);
  for (int64_t h = 0; h < kv; ++h) {
    const auto hs = static_cast<size_t>(h);
    if (target[hs] < 0 || !(best[hs] >= threshold)) continue;
    const double w = std::exp(best[hs]), den = own + w;
    float* kt = k + h * ks0 + target[hs] * ks1;
    float* vt = v + h * vs0 + target[hs] * vs1;
    const float* ke = k + h * ks0 + evicted[hs] * ks1;
    const float* ve = v + h * vs0 + evicted[hs] * vs1;
    for (int64_t c = 0; c < d; ++c) {
      kt[c] = static_cast<float>((kt[c] * own + ke[c] * w) / den);
      vt[c] = static_cast<float>((vt[c] * own + ve[c] * w) / den);
    }
    rows.insert(rows.end(), {h, evicted[hs], target[hs]});
  }
  if (merged != nullptr && !rows.empty()) {
    *merged = at::tensor(rows, at::kLong).view({-1, 3});
  }
}

}  // namespace

void d2o_merge_one_per_head_on_device(LayerCache& cache, const at::Tensor& keep, double beta, at::Tensor& threshold,
                                      at::Tensor* merged, bool ema) {
  const MergeableRows::Rows rows_of_cache = require_mergeable_rows(cache, kMergePurpose).merge_rows();
  at::Tensor keys = rows_of_cache.keys, values = rows_of_cache.values;
  const int64_t kv = keys.size(0), s = keys.size(1), d = keys.size(2);
  KVC_CHECK(keep.size(1) == s - 1 && s > 1, "d2o: the device merge takes one evicted entry per head");
  const at::Tensor evict = (s * (s - 1) / 2 - keep.sum(1)).view({kv, 1});  // the index each sorted row misses
  const auto row_at = [&](const at::Tensor& t, const at::Tensor& index) {
    return t.gather(1, index.view({kv, 1, 1}).expand({kv, 1, d})).to(at::kFloat);  // [kv, 1, d]
  };
  const at::Tensor ke = row_at(keys, evict);
  const at::Tensor norms = at::linalg_vector_norm(keys, 2, {-1}, false, at::kFloat).clamp_min(1e-12);  // [kv, s]
  at::Tensor sim = at::bmm(ke.to(keys.scalar_type()), keys.transpose(1, 2)).squeeze(1).to(at::kFloat);
  sim = sim.div_(norms.gather(1, evict) * norms).scatter_(1, evict, -std::numeric_limits<float>::infinity());
  const auto [best, target] = sim.max(1, /*keepdim=*/true);  // [kv, 1]
  const at::Tensor mean_best = best.to(at::kDouble).mean();
  if (ema) threshold = at::where(threshold < 0, mean_best, beta * mean_best + (1 - beta) * threshold);
  const at::Tensor merge = (best.to(at::kDouble) >= threshold).view({kv, 1, 1});
  const at::Tensor w = best.to(at::kDouble).exp().view({kv, 1, 1}), own = at::full({}, std::exp(1.0), w.options());
  const auto merged_row = [&](const at::Tensor& t, const at::Tensor& evicted_row) {
    const at::Tensor kept_row = row_at(t, target).to(at::kDouble);
    const at::Tensor mixed = (kept_row * own + evicted_row.to(at::kDouble) * w) / (own + w);
    return at::where(merge, mixed, kept_row).to(t.scalar_type());
  };
  const at::Tensor slot = target.view({kv, 1, 1}).expand({kv, 1, d});
  const at::Tensor new_k = merged_row(keys, ke), new_v = merged_row(values, row_at(values, evict));
  keys.scatter_(1, slot, new_k);
  values.scatter_(1, slot, new_v);
  if (merged != nullptr) {
    // Recording the merges (--dump-kept) reads them back; decoding alone does not.
    const at::Tensor heads = merge.view({kv}).nonzero().squeeze(1);
    if (heads.numel() > 0) {
      *merged =
          at::stack({heads, evict.view({kv}).index_select(0, heads), target.view({kv}).index_select(0, heads)}, 1);
    }
  }
}

void d2o_merge(LayerCache& cache, const at::Tensor& keep, double beta, double& threshold, at::Tensor* merged,
               bool ema) {
  // In place on the cache's own storage: while decoding, one pass over the keys for norms and one for
  // similarities, and only the kept rows that receive a merge are rewritten, because copying the whole
  // cache at every decode step would cost more than eviction saves.
  const MergeableRows::Rows rows_of_cache = require_mergeable_rows(cache, kMergePurpose).merge_rows();
  at::Tensor keys = rows_of_cache.keys, values = rows_of_cache.values;
  const int64_t kv = keys.size(0), s = keys.size(1), d = keys.size(2), k = keep.size(1), e = s - k;
  if (e <= 0) return;
  const bool plain_rows = keys.scalar_type() == at::kFloat && values.scalar_type() == at::kFloat &&
                          keys.device().is_cpu() && keys.stride(2) == 1 && values.stride(2) == 1;
  if (e == 1 && plain_rows && s > 1)
    return merge_one_per_head(keys, values, keep.contiguous(), beta, threshold, merged, ema);
  at::Tensor evicted_mask = at::ones({kv, s}, keep.options().dtype(at::kBool));
  evicted_mask.scatter_(1, keep, false);
  const at::Tensor evict = at::arange(s, keep.options()).expand({kv, s}).masked_select(evicted_mask).view({kv, e});
  // A 16-bit cache (--cache-type-k/-v) is merged in fp32 and stored back in its own type.
  const at::ScalarType math = keys.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  // Whole rows per head (index_select copies rows; gather would index every element).
  const auto rows = [&](const at::Tensor& t, const at::Tensor& idx) {
    std::vector<at::Tensor> heads;
    for (int64_t h = 0; h < kv; ++h) heads.push_back(t[h].index_select(0, idx[h]));
    return at::stack(heads).to(math);
  };
  const at::Tensor ke = rows(keys, evict);
  // Few evicted (decoding: one): compare with every entry where it lies and mask the evicted ones. Many
  // (prefill): compare with a gathered copy of the kept ones, so the similarities stay [kv, e, k].
  const bool few_evicted = e <= k;
  const at::Tensor candidates = few_evicted ? keys.to(math) : rows(keys, keep);
  const auto norm = [](const at::Tensor& x) { return x.norm(2, -1).clamp_min(1e-12); };
  const at::Tensor ke_norm = norm(ke), candidate_norm = norm(candidates);
  // Each evicted entry's most similar candidate, by (KV head, block of evicted entries) in parallel: at
  // prefill the whole matrix would be hundreds of MB of fresh memory per layer, and one product on one
  // thread (BLAS runs single-threaded inside our parallel regions).
  at::Tensor best_sim = at::empty({kv, e}, ke.options()), best_index = at::empty({kv, e}, keep.options());
  const int64_t n_candidates = candidates.size(1);
  const int64_t block = std::max<int64_t>(1, kSimilarityBlockElements / std::max<int64_t>(1, n_candidates));
  const int64_t blocks = (e + block - 1) / block;
  at::parallel_for(0, kv * blocks, parallel_grain(std::min(block, e) * n_candidates * d), [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t h = i / blocks, e0 = (i % blocks) * block, n = std::min(block, e - e0);
      at::Tensor sim = at::mm(ke[h].narrow(0, e0, n), candidates[h].t())  // [n, candidates]
                           .div_(ke_norm[h].narrow(0, e0, n).unsqueeze(1) * candidate_norm[h].unsqueeze(0));
      if (few_evicted) sim.masked_fill_(evicted_mask[h].unsqueeze(0), -std::numeric_limits<double>::infinity());
      const auto best = sim.max(-1);
      best_sim[h].narrow(0, e0, n).copy_(std::get<0>(best));
      best_index[h].narrow(0, e0, n).copy_(std::get<1>(best));
    }
  });
  const at::Tensor target = few_evicted ? best_index : keep.gather(1, best_index);  // a kept slot
  const double mean_best = best_sim.mean().item<double>();
  update_threshold(threshold, mean_best, beta, ema);
  // Weights exp(similarity); the kept token has similarity 1 with itself, so e^1 is the largest.
  const at::Tensor merges = best_sim >= threshold;  // [kv, e]
  if (!merges.any().item<bool>()) return;
  const at::Tensor head = at::arange(kv, keep.options()).unsqueeze(1).expand({kv, e}).masked_select(merges);
  const at::Tensor slot = target.masked_select(merges), source = evict.masked_select(merges);
  if (merged != nullptr) *merged = at::stack({head, source, slot}, 1);
  const at::Tensor w = best_sim.masked_select(merges).exp().unsqueeze(-1);  // [m, 1]
  const at::Tensor merged_keys = ke.masked_select(merges.unsqueeze(-1)).view({-1, d});
  // Only the merged entries' values are read.
  const at::Tensor merged_values = values.index({head, source}).to(math);
  // Several evicted entries may share a target: sum per distinct (head, slot). The targets are marked in
  // a table of every (head, slot) and numbered by a running count (linear; a sort-based unique was a
  // quarter of the merge's time at prefill).
  const at::Tensor flat = head * s + slot;
  const at::Tensor targeted = at::zeros({kv * s}, keep.options()).index_fill_(0, flat, 1);
  const at::Tensor unique = targeted.nonzero().squeeze(1);
  const at::Tensor inverse = (targeted.cumsum(0) - 1).index_select(0, flat);
  const int64_t m = unique.size(0);
  const double own = std::exp(1.0);
  const at::Tensor den = at::full({m, 1}, own, w.options()).index_add_(0, inverse, w);
  const at::Tensor u_head = unique.div(s, "floor"), u_slot = unique.remainder(s);
  const at::Tensor new_k = (keys.index({u_head, u_slot}).to(math) * own).index_add_(0, inverse, merged_keys * w) / den;
  const at::Tensor new_v =
      (values.index({u_head, u_slot}).to(math) * own).index_add_(0, inverse, merged_values * w) / den;
  keys.index_put_({u_head, u_slot}, new_k.to(keys.scalar_type()));
  values.index_put_({u_head, u_slot}, new_v.to(values.scalar_type()));
}

void register_d2o() {
  register_method("d2o",
                  "inverse-variance layer budgets; sinks+recent+heavy tokens; merges evicted (bounded) "
                  "(D2O, arXiv:2406.13035; sinks=4,recent=0.25,beta=0.7,threshold=ema,layers=variance)",
                  [](const PressParams& p) {
                    p.check_known_keys(
                        {"sinks", "recent", "beta", "tau", "merge", "threshold", "layers", "variance", "agg", "heads"});
                    PressConfig c;
                    const int64_t sinks = p.get_int("sinks", 4);
                    const double recent = p.get_double("recent", 0.25);
                    KVC_CHECK(sinks >= 0, "--press d2o: sinks must be >= 0");
                    KVC_CHECK(recent >= 0 && recent <= 1, "--press d2o: recent is a share of the budget in [0, 1]");
                    c.scorer = std::make_shared<D2OScorer>(sinks, recent);
                    // Ablations (the paper's Tables 4 and 6): merge=0 drops evicted entries (no
                    // compensation); layers=uniform gives every layer the same budget ("w.o. Layer
                    // Operation"); threshold=none merges every evicted entry ("w.o. EMA-Threshold"),
                    // threshold=C a fixed cosine C; layers=reciprocal and exp_decay are Table 4's other
                    // splits. kvc's own: layers=scaled is the softmax of τ · (1/σ²) / mean(1/σ²)
                    // (temperature `tau`); variance=head_mean takes the variance of the head-averaged
                    // sequence instead of averaging per-head variances.
                    const std::map<std::string, D2OLayers> splits{{"variance", D2OLayers::Variance},
                                                                  {"reciprocal", D2OLayers::Reciprocal},
                                                                  {"exp_decay", D2OLayers::ExpDecay},
                                                                  {"scaled", D2OLayers::Scaled},
                                                                  {"uniform", D2OLayers::Uniform}};
                    const std::string layers = p.get_string("layers", "variance");
                    KVC_CHECK(splits.count(layers) == 1,
                              "--press d2o: layers must be variance, reciprocal, "
                              "exp_decay, scaled or uniform, got '{}'",
                              layers);
                    D2OOptions o;
                    o.layers = splits.at(layers);
                    const std::string threshold = p.get_string("threshold", "ema");
                    if (threshold == "none") {
                      o.ema = false;
                      o.fixed_threshold = -std::numeric_limits<double>::infinity();
                    } else if (threshold != "ema") {
                      o.ema = false;
                      o.fixed_threshold = p.get_double("threshold", 0.0);
                      KVC_CHECK(o.fixed_threshold >= -1 && o.fixed_threshold <= 1,
                                "--press d2o: threshold must be "
                                "ema (Eq. 10), none (merge every evicted entry) or a cosine in [-1, 1], got {}",
                                threshold);
                    }
                    const std::string variance = p.get_string("variance", "per_head");
                    KVC_CHECK(variance == "per_head" || variance == "head_mean",
                              "--press d2o: variance must be per_head or head_mean, got '{}'", variance);
                    o.variance_of_head_mean = variance == "head_mean";
                    c.bounded = true;
                    c.cumulative = true;
                    o.merge = p.get_int("merge", 1) != 0;
                    o.beta = p.get_double("beta", 0.7);
                    o.tau = p.get_double("tau", 1.0);
                    KVC_CHECK(o.beta >= 0 && o.beta <= 1, "--press d2o: beta must be in [0, 1]");
                    KVC_CHECK(o.merge || threshold == "ema",
                              "--press d2o: threshold={} applies to the merge, and "
                              "merge=0 has none",
                              threshold);
                    c.allocator = [o] { return std::make_unique<D2OAllocator>(o); };
                    return c;
                  });
}

}  // namespace kvc
