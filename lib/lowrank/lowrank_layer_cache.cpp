#include "lowrank/lowrank_layer_cache.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "cache/blocked_attention.h"
#include "cache/capacity_growth.h"
#include "kernels/per_head_products.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

// Tokens whose keys are rebuilt, and scored, by one product.
constexpr int64_t kKeyBlock = 1024;

// Query rows up to which the CSR kernels read the coefficients where they lie (a decode step's heads);
// beyond, one product over a padded copy is faster.
constexpr int64_t kCsrKernelRows = 64;

bool csr_kernels_apply(const at::Tensor& coeffs, bool offsets_on_device, const at::Tensor& rows) {
  return coeffs.defined() && coeffs.device().is_cpu() && !offsets_on_device && rows.size(0) <= kCsrKernelRows &&
         !rows.requires_grad() && (rows.scalar_type() == at::kFloat || rows.scalar_type() == at::kDouble);
}

at::Tensor to_tensor(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace

int64_t LowRankLayerCache::Store::used() const {
  if (!offsets_on_device) return offsets.back();
  if (tokens == 0) return 0;
  ++host_reads;
  return device_offsets[tokens].item<int64_t>();
}

std::vector<int64_t> LowRankLayerCache::Store::host_offsets() const {
  if (!offsets_on_device) return offsets;
  if (tokens == 0) return {0};
  ++host_reads;
  const at::Tensor host = device_offsets.narrow(0, 0, tokens + 1).to(at::kCPU).contiguous();
  return std::vector<int64_t>(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + tokens + 1);
}

at::Tensor LowRankLayerCache::Store::ranks() const {
  if (offsets_on_device) {
    if (tokens > 0) ++host_reads;
    return tokens > 0 ? device_ranks.narrow(0, 0, tokens).to(at::kCPU) : at::empty({0}, at::kLong);
  }
  std::vector<int64_t> r(offsets.size() - 1);
  for (size_t t = 0; t + 1 < offsets.size(); ++t) r[t] = offsets[t + 1] - offsets[t];
  return at::tensor(r, at::TensorOptions().dtype(at::kLong));
}

int64_t LowRankLayerCache::Store::capacity_bytes() const {
  const int64_t coefficient_bytes = coeffs.defined() ? coeffs.numel() * element_bytes() : 0;
  const auto index_bytes = [](const at::Tensor& t) { return t.defined() ? t.numel() * 8 : int64_t{0}; };
  return coefficient_bytes +
         (offsets_on_device ? index_bytes(device_offsets) : static_cast<int64_t>(offsets.size()) * 8) +
         index_bytes(device_ranks);
}

void LowRankLayerCache::Store::push(const at::Tensor& padded, const std::vector<int64_t>& ranks,
                                    const at::Tensor& ranks_tensor) {
  if (offsets_on_device) return push_on_device(padded, ranks_tensor);
  const int64_t T = padded.size(0), d = padded.size(1);
  const int64_t r0 = ranks.empty() ? 0 : ranks[0];
  const bool same = std::all_of(ranks.begin(), ranks.end(), [&](int64_t r) { return r == r0; });
  at::Tensor flat;
  if (same) {
    flat = padded.narrow(1, 0, r0).reshape({-1});
  } else {
    // Row-major selection of each row's prefix is exactly the CSR layout.
    const at::Tensor r = ranks_tensor.to(padded.device());
    flat = padded.masked_select(at::arange(d, r.options()).unsqueeze(0) < r.unsqueeze(1));
  }
  uniform_rank = (offsets.size() == 1 || uniform_rank == r0) && same ? r0 : -1;
  for (const int64_t r : ranks) max_rank = std::max(max_rank, r);
  const int64_t need = used() + flat.numel();
  if (!coeffs.defined() || need > coeffs.numel()) {
    // Geometric growth keeps decoding appends amortised O(1); the first append sizes exactly, for the
    // reserved tokens at this append's mean rank.
    const int64_t tokens = static_cast<int64_t>(offsets.size()) - 1 + T;
    const int64_t cap = used() > 0                 ? grown_capacity(need, coeffs.numel())
                        : reserved_tokens > tokens ? need + (reserved_tokens - tokens) * ((need + tokens - 1) / tokens)
                                                   : need;
    at::Tensor grown = at::empty({cap}, stored);
    if (used() > 0) grown.narrow(0, 0, used()).copy_(coeffs.narrow(0, 0, used()));
    coeffs = grown;
  }
  coeffs.narrow(0, used(), flat.numel()).copy_(flat);  // rounds to the stored type
  if (!padded.device().is_cpu()) {
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    if (!device_ranks.defined() || n + T > device_ranks.numel()) {
      const int64_t capacity = device_ranks.defined() ? device_ranks.numel() : 0;
      at::Tensor grown = at::empty({grown_capacity(n + T, capacity)}, ranks_tensor.options());
      if (n > 0) grown.narrow(0, 0, n).copy_(device_ranks.narrow(0, 0, n));
      device_ranks = grown;
    }
    device_ranks.narrow(0, n, T).copy_(ranks_tensor);
  }
  for (int64_t t = 0; t < T; ++t) offsets.push_back(offsets.back() + ranks[static_cast<size_t>(t)]);
  tokens += T;
}

void LowRankLayerCache::Store::make_room_on_device(const at::Tensor& ranks, int64_t width) {
  const int64_t T = ranks.size(0);
  const int64_t capacity = coeffs.defined() ? coeffs.numel() - 1 : 0;  // the last element is scratch
  if (coeffs.defined() && used_bound + T * width <= capacity) {
    used_bound += T * width;
    return;
  }
  // One read: the coefficients used once this append is in.
  ++host_reads;
  const at::Tensor appended = ranks.sum();
  const int64_t after = (tokens > 0 ? device_offsets[tokens] + appended : appended).item<int64_t>();
  used_bound = after;
  const int64_t room = kRoomTokens * width;
  if (after + room <= capacity) return;
  int64_t cap = grown_capacity(after + room, capacity);
  if (!coeffs.defined() && reserved_tokens > tokens + T && T > 0) {
    // The reserved tokens at this append's mean rank, as the host layout sizes its first allocation.
    cap = std::max(cap, after + (reserved_tokens - tokens - T) * ((after + T - 1) / T) + room);
  }
  at::Tensor grown = at::zeros({cap + 1}, stored);
  if (coeffs.defined() && tokens > 0) grown.narrow(0, 0, capacity).copy_(coeffs.narrow(0, 0, capacity));
  coeffs = grown;
}

void LowRankLayerCache::Store::push_on_device(const at::Tensor& padded, const at::Tensor& ranks_tensor) {
  const int64_t T = padded.size(0), width = padded.size(1), n = tokens;
  if (T == 0) return;
  const at::Tensor r = ranks_tensor.to(padded.device(), at::kLong);
  const auto grow_index = [&](at::Tensor& index, int64_t needed, int64_t kept) {
    if (index.defined() && needed <= index.numel()) return;
    at::Tensor grown = at::zeros({grown_capacity(needed, index.defined() ? index.numel() : 0)}, r.options());
    if (index.defined() && kept > 0) grown.narrow(0, 0, kept).copy_(index.narrow(0, 0, kept));
    index = grown;
  };
  grow_index(device_offsets, n + T + 1, n + 1);
  grow_index(device_ranks, n + T, n);
  make_room_on_device(r, width);
  // Token t's leading r_t coefficients go to [offsets[t], offsets[t] + r_t); the rest of its row to the
  // scratch element past the end, so the scatter needs no count of the kept ones.
  const at::Tensor ends = device_offsets.narrow(0, n, 1) + r.cumsum(0);
  const at::Tensor starts = ends - r;
  const at::Tensor column = at::arange(width, r.options()).unsqueeze(0);
  const at::Tensor dest = (starts.unsqueeze(1) + column).masked_fill_(column >= r.unsqueeze(1), coeffs.numel() - 1);
  coeffs.index_copy_(0, dest.reshape({-1}), padded.reshape({-1}).to(stored.dtype().toScalarType()));
  device_offsets.narrow(0, n + 1, T).copy_(ends);
  device_ranks.narrow(0, n, T).copy_(r);
  tokens += T;
  uniform_rank = -1;
  max_rank = std::max(max_rank, width);
}

at::Tensor LowRankLayerCache::Store::padded_on_device(int64_t s0, int64_t s1, at::ScalarType compute) const {
  const int64_t n = s1 - s0, width = max_rank;
  const at::Tensor r = device_ranks.narrow(0, s0, n).unsqueeze(1);
  const at::Tensor column = at::arange(width, r.options()).unsqueeze(0);
  const at::Tensor unused = column >= r;
  const at::Tensor index =
      (device_offsets.narrow(0, s0, n).unsqueeze(1) + column).masked_fill_(unused, coeffs.numel() - 1);
  return coeffs.index_select(0, index.reshape({-1})).view({n, width}).masked_fill_(unused, 0).to(compute);
}

at::Tensor LowRankLayerCache::Store::padded(int64_t s0, int64_t s1, int64_t* max_rank, at::ScalarType compute) const {
  if (offsets_on_device) {
    *max_rank = this->max_rank;
    return padded_on_device(s0, s1, compute);
  }
  const int64_t n = s1 - s0, begin = offsets[s0], count = offsets[s1] - begin;
  if (uniform_rank >= 0) {
    *max_rank = uniform_rank;
    return coeffs.narrow(0, begin, count).view({n, uniform_rank}).to(compute);
  }
  int64_t rmax = 0;
  for (int64_t t = s0; t < s1; ++t) rmax = std::max(rmax, rank(t));
  *max_rank = rmax;
  if (!coeffs.device().is_cpu()) {
    // On a GPU the row-major scatter under the rank mask (the inverse of push's masked_select) builds
    // the matrix there: a host index vector would cross to the GPU every decode step.
    const at::Tensor r = device_ranks.narrow(0, s0, n);
    const at::Tensor mask = at::arange(rmax, r.options()).unsqueeze(0) < r.unsqueeze(1);
    return at::zeros({n, rmax}, coeffs.options()).masked_scatter_(mask, coeffs.narrow(0, begin, count)).to(compute);
  }
  // Each token's prefix copied into its row: no index vector is built.
  at::Tensor out = at::zeros({n, rmax}, coeffs.options());
  const int64_t bytes = element_bytes();
  const auto* src = static_cast<const char*>(coeffs.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t t = s0; t < s1; ++t) {
    std::memcpy(dst + (t - s0) * rmax * bytes, src + offsets[t] * bytes, static_cast<size_t>(rank(t) * bytes));
  }
  return out.to(compute);
}

void LowRankLayerCache::Store::keep(const std::vector<int64_t>& kept) {
  const std::vector<int64_t> old = host_offsets();
  std::vector<int64_t> src, new_offsets{0};
  int64_t r0 = -2;
  bool same = true;
  for (int64_t t : kept) {
    const int64_t r = old[t + 1] - old[t];
    for (int64_t j = old[t]; j < old[t + 1]; ++j) src.push_back(j);
    new_offsets.push_back(new_offsets.back() + r);
    if (r0 == -2) r0 = r;
    same = same && r == r0;
  }
  // An exactly-sized buffer: the old one is released.
  coeffs = src.empty() ? at::empty({0}, stored) : coeffs.index_select(0, to_tensor(src, coeffs.device())).clone();
  if (device_ranks.defined()) {
    device_ranks = kept.empty() ? device_ranks.narrow(0, 0, 0).clone()
                                : device_ranks.index_select(0, to_tensor(kept, device_ranks.device()));
  }
  tokens = static_cast<int64_t>(kept.size());
  max_rank = 0;
  for (size_t t = 0; t + 1 < new_offsets.size(); ++t)
    max_rank = std::max(max_rank, new_offsets[t + 1] - new_offsets[t]);
  if (offsets_on_device) {
    coeffs = at::cat({coeffs, at::zeros({1}, stored)});  // the scratch element
    used_bound = new_offsets.back();
    device_offsets = to_tensor(new_offsets, coeffs.device());
    return;
  }
  offsets = std::move(new_offsets);
  uniform_rank = same && r0 >= 0 ? r0 : (kept.empty() ? uniform_rank : -1);
}

LowRankLayerCache::LowRankLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                                     std::shared_ptr<const RankedProjection> key,
                                     std::shared_ptr<const RankedProjection> value, CacheTypes stored,
                                     bool offsets_on_device)
    : shape_(shape),
      rope_(std::move(rope)),
      options_(options),
      key_proj_(std::move(key)),
      value_proj_(std::move(value)) {
  stored = stored.resolved(options_.dtype().toScalarType());
  for (const at::ScalarType t : {stored.keys, stored.values}) {
    KVC_CHECK(at::isFloatingType(t) && !is_block_format(t),
              "--lowrank stores a different number of coefficients per token, which {} blocks of 32 values do not "
              "fit; use --cache-type-k/-v f32, f16 or bf16 with --lowrank",
              cache_type_name(t));
  }
  key_.stored = options_.dtype(stored.keys);
  value_.stored = options_.dtype(stored.values);
  const bool device_layout = offsets_on_device || !options_.device().is_cpu();
  key_.offsets_on_device = device_layout && key_proj_->gated();
  value_.offsets_on_device = device_layout && value_proj_->gated();
  positions_ = at::empty({0}, options_.dtype(at::kLong));
}

void LowRankLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  const int64_t T = keys.size(1), dkv = shape_.num_kv_heads * shape_.head_dim;
  for (auto [store, proj, x] :
       {std::make_tuple(&key_, key_proj_.get(), &keys), std::make_tuple(&value_, value_proj_.get(), &values)}) {
    // [n_kv, T, d] -> [T, n_kv * d]: all heads of a token form one latent vector.
    const auto flat = [&](const at::Tensor& heads) { return heads.transpose(0, 1).reshape({T, dkv}); };
    const at::Tensor heads = x->to(options_.dtype());
    const at::Tensor state = flat(heads);
    const at::Tensor basis_in = proj->rotated ? flat(rope_->apply(heads, positions)) : state;
    // A fixed rank is known on the host; a gated one is read back for the host layout, and stays where
    // it is for the device layout, whose append computes every coefficient (its ranks are unknown here).
    std::vector<int64_t> ranks(static_cast<size_t>(T), proj->fixed_rank);
    const auto read_ranks = [&](const at::Tensor& r) {
      if (!proj->gated() || store->offsets_on_device) return;
      const at::Tensor host = r.to(at::kCPU).contiguous();
      ranks.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + T);
    };
    at::Tensor coeffs, r;
    if (proj->ranks_first()) {
      // Ranks first: only the coefficients up to the largest kept rank are computed.
      r = proj->ranks(state, {});
      read_ranks(r);
      const bool known = T > 0 && !store->offsets_on_device;
      coeffs = proj->project(basis_in, known ? *std::max_element(ranks.begin(), ranks.end()) : -1);
    } else {
      coeffs = proj->project(basis_in);
      r = proj->ranks(state, coeffs);
      read_ranks(r);
    }
    store->push(coeffs, ranks, r);
  }
  if (length_ + T > positions_.numel()) {
    at::Tensor grown = at::empty({grown_capacity(length_ + T, positions_.numel())}, positions_.options());
    grown.narrow(0, 0, length_).copy_(positions_.narrow(0, 0, length_));
    positions_ = grown;
  }
  positions_.narrow(0, length_, T).copy_(positions);
  length_ += T;
  // Kept on the CPU only: on a GPU attend() masks without it, reading no positions back.
  if (positions.device().is_cpu()) max_position_ = std::max(max_position_, positions.max().item<int64_t>());
}

at::Tensor LowRankLayerCache::key_block_as_stored(int64_t s0, int64_t s1) const {
  int64_t r = 0;
  const at::Tensor coeffs = key_.padded(s0, s1, &r, options_.dtype().toScalarType());
  return key_proj_->rebuild(coeffs, shape_.num_kv_heads, shape_.head_dim);
}

at::Tensor LowRankLayerCache::rotated_key_block(int64_t s0, int64_t s1) const {
  const at::Tensor x = key_block_as_stored(s0, s1);
  return key_proj_->rotated ? x : rope_->apply(x, positions_.narrow(0, s0, s1 - s0));
}

// The cache's entries for one attention call: keys rebuilt per block of tokens (once per call) or, for
// keys in a rotated basis, scored in the latent space; values weighed in the spectral space and
// projected once per KV head.
class LowRankLayerCache::Entries : public EntryBlocks {
 public:
  explicit Entries(const LowRankLayerCache& cache)
      : cache_(cache),
        positions_(cache.positions().unsqueeze(0)),
        compute_(cache.options_.dtype().toScalarType()),
        key_rank_(cache.key_.max_rank),
        value_rank_(cache.value_.max_rank) {
    const int64_t KV = cache.shape_.num_kv_heads, d = cache.shape_.head_dim;
    // Per KV head, the rows of U_v^{-1} that map the leading value_rank_ latent dims to that head's value.
    value_back_ = cache.value_proj_->per_head_inverse(value_rank_, KV, d);
    if (cache.key_proj_->rotated) {
      // Per KV head, U_k^{-1}[:r, head] [KV, r, d]: a query's products with its rows are the query in the
      // key latent.
      key_latent_ = cache.key_proj_->per_head_inverse(key_rank_, KV, d);
    }
  }

  const at::Tensor& positions() const override { return positions_; }
  std::optional<int64_t> max_position() const override {
    if (!positions_.device().is_cpu()) return std::nullopt;
    return cache_.max_position_;
  }
  int64_t key_block(int64_t query_rows) const override {
    return scores_in_latent(query_rows) ? std::max<int64_t>(1, size()) : kKeyBlock;
  }

  // Keys are rebuilt once per call and held until it ends, so a long prefill does not rebuild them for
  // each block of queries: the transient is one layer's keys, half of what a dense cache keeps per layer.
  at::Tensor keys(int64_t s0, int64_t s1) override {
    if (held_.empty()) {
      for (int64_t b0 = 0; b0 < cache_.length_; b0 += kKeyBlock) {
        held_.push_back(cache_.rotated_key_block(b0, std::min(cache_.length_, b0 + kKeyBlock)));
      }
    }
    const auto b = static_cast<size_t>(s0 / kKeyBlock);
    return held_[b].narrow(1, s0 - static_cast<int64_t>(b) * kKeyBlock, s1 - s0);
  }

  // Rotated keys: scored in the latent when that is less work than rebuilding them, i.e. for few query
  // rows (a decode step): rows · r per token and KV head instead of r · d + rows · d.
  bool scores_in_latent(int64_t rows) const {
    const int64_t d = cache_.shape_.head_dim;
    return key_latent_.defined() && rows * key_rank_ < key_rank_ * d + rows * d;
  }

  at::Tensor scores(const at::Tensor& queries, int64_t s0, int64_t s1) override {
    const int64_t KV = cache_.shape_.num_kv_heads, rows = queries.size(1);
    if (!scores_in_latent(rows)) return EntryBlocks::scores(queries, s0, s1);
    if (key_rank_ == 0) return at::zeros({KV, rows, s1 - s0}, queries.options());
    at::Tensor latent = per_head_dot_rows(queries.contiguous(), key_latent_);
    if (!latent.defined()) latent = at::bmm(queries, key_latent_.transpose(1, 2));
    latent = latent.reshape({KV * rows, key_rank_}).contiguous();
    at::Tensor out;
    if (csr_kernels_apply(cache_.key_.coeffs, cache_.key_.offsets_on_device, latent)) {
      out = csr_latent_scores(cache_.key_.csr(s0, s1), latent);
    } else {
      int64_t r = 0;
      const at::Tensor coeffs = cache_.key_.padded(s0, s1, &r, compute_);
      out = latent.narrow(1, 0, r).matmul(coeffs.transpose(0, 1));
    }
    return out.view({KV, rows, s1 - s0});
  }

  // Σ_t a_t x̂_t in the spectral space (only the leading max-rank dims can be non-zero), then projected
  // once per KV head by its slice of U_v^{-1}.
  at::Tensor weigh_values(const at::Tensor& probs) override {
    const int64_t visible = probs.size(2), KV = cache_.shape_.num_kv_heads, rows = probs.size(1);
    const at::Tensor p = probs.to(compute_);
    at::Tensor z;
    const at::Tensor p_rows = p.reshape({KV * rows, visible});
    if (csr_kernels_apply(cache_.value_.coeffs, cache_.value_.offsets_on_device, p_rows)) {
      z = csr_latent_weigh(cache_.value_.csr(0, visible), p_rows.contiguous(), value_rank_)
              .view({KV, rows, value_rank_});
    } else {
      z = at::zeros({KV, rows, value_rank_}, cache_.options_);
      for (int64_t s0 = 0; s0 < visible; s0 += kKeyBlock) {
        const int64_t s1 = std::min(visible, s0 + kKeyBlock);
        int64_t r = 0;
        const at::Tensor coeffs = cache_.value_.padded(s0, s1, &r, compute_);
        if (r > 0) z.narrow(2, 0, r).add_(at::matmul(p.narrow(2, s0, s1 - s0), coeffs));
      }
    }
    const at::Tensor out = per_head_combine_rows(z.contiguous(), value_back_);
    return out.defined() ? out : at::bmm(z, value_back_);
  }

 private:
  const LowRankLayerCache& cache_;
  at::Tensor positions_;  // [1, S]: one latent, so one set of positions for every head
  at::ScalarType compute_;
  int64_t key_rank_;       // the largest kept key rank
  int64_t value_rank_;     // the largest kept value rank: the latent dims that can be non-zero
  at::Tensor value_back_;  // [KV, value_rank_, d]
  at::Tensor key_latent_;  // [KV, key_rank_, d] for rotated keys; else undefined
  std::vector<at::Tensor> held_;
};

at::Tensor LowRankLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                     const AttentionProbe& probe, AttentionStats* stats) {
  Entries entries(*this);
  return blocked_attention(shape_, queries.to(options_.dtype()), q_positions, entries, probe, stats)
      .to(queries.scalar_type());
}

void LowRankLayerCache::retain(const at::Tensor& indices) {
  KVC_CHECK(indices.dim() == 2 && indices.size(0) == shape_.num_kv_heads,
            "retain: expected indices of shape [{}, n], got {} dims", shape_.num_kv_heads, indices.dim());
  const at::Tensor idx = indices.to(at::kCPU, at::kLong).contiguous();
  KVC_CHECK(idx.size(1) == 0 || at::equal(idx, idx[0].unsqueeze(0).expand_as(idx)),
            "--lowrank: this press keeps different tokens per KV head, but the low-rank latent is shared by all "
            "heads; use one token set per layer, e.g. --press snapkv:heads=shared");
  const int64_t* kept = idx.data_ptr<int64_t>();
  std::vector<int64_t> tokens(kept, kept + idx.size(1));
  for (const int64_t t : tokens) {
    KVC_CHECK(t >= 0 && t < length_, "retain: index {} out of range for a cache of {} entries", t, length_);
  }
  key_.keep(tokens);
  value_.keep(tokens);
  positions_ = positions().index_select(0, to_tensor(tokens, positions_.device())).clone();
  length_ = static_cast<int64_t>(tokens.size());
  max_position_ = length_ > 0 && positions_.device().is_cpu() ? positions().max().item<int64_t>() : -1;
}

void LowRankLayerCache::reserve(int64_t entries) {
  key_.reserved_tokens = value_.reserved_tokens = entries;
  if (entries <= positions_.numel()) return;
  at::Tensor grown = at::empty({entries}, positions_.options());
  grown.narrow(0, 0, length_).copy_(positions_.narrow(0, 0, length_));
  positions_ = grown;
}

std::unique_ptr<LayerCache> LowRankLayerCache::clone() const {
  auto copy = std::make_unique<LowRankLayerCache>(*this);
  for (Store* store : {&copy->key_, &copy->value_}) {
    if (store->coeffs.defined()) store->coeffs = store->coeffs.clone();
    if (store->device_ranks.defined()) store->device_ranks = store->device_ranks.clone();
    if (store->device_offsets.defined()) store->device_offsets = store->device_offsets.clone();
  }
  copy->positions_ = positions_.clone();
  return copy;
}

at::Tensor LowRankLayerCache::lengths() const {
  return at::full({shape_.num_kv_heads}, length_, at::TensorOptions().dtype(at::kLong));
}

CacheFootprint LowRankLayerCache::footprint() const {
  CacheFootprint f;
  f.entries = length_ * shape_.num_kv_heads;
  f.payload_bytes = key_.used() * key_.element_bytes() + value_.used() * value_.element_bytes();
  f.ram_bytes = f.payload_bytes;
  f.step_read_bytes =
      f.payload_bytes + matrix_bytes_per_step(key_, *key_proj_) + matrix_bytes_per_step(value_, *value_proj_);
  f.resident_bytes = resident_bytes();
  return f;
}

int64_t LowRankLayerCache::resident_bytes() const {
  return key_.capacity_bytes() + value_.capacity_bytes() + positions_.numel() * 8;
}

int64_t LowRankLayerCache::matrix_bytes_per_step(const Store& store, const RankedProjection& proj) const {
  const auto bytes = [](const at::Tensor& t) { return t.defined() ? static_cast<int64_t>(t.nbytes()) : int64_t{0}; };
  const int64_t dkv = shape_.num_kv_heads * shape_.head_dim;
  const int64_t row_bytes = dkv * static_cast<int64_t>(c10::elementSize(options_.dtype().toScalarType()));
  // The new token's gate logits (every gate matrix), its coefficients (the columns of U up to its rank,
  // taken as the mean rank; all of them when the gate reads the coefficients), and the rows of U^{-1}
  // up to the largest stored rank, through which a query enters the key latent (or keys are rebuilt)
  // and the weighed values leave the value latent.
  const int64_t gate = bytes(proj.W_rows.defined() ? proj.W_rows : proj.W) +
                       bytes(proj.gate_U_rows.defined() ? proj.gate_U_rows : proj.gate_U);
  const int64_t all_columns = proj.U_rows.defined() ? proj.U_rows.size(0) : proj.U.defined() ? proj.U.size(1) : 0;
  const int64_t mean_rank = length_ > 0 ? (store.used() + length_ - 1) / length_ : 0;
  const int64_t new_token_columns = proj.ranks_first() ? mean_rank : all_columns;
  return gate + (new_token_columns + store.max_rank) * row_bytes;
}

double LowRankLayerCache::retain_rate() const {
  if (length_ == 0) return 0.0;
  return static_cast<double>(key_.used() + value_.used()) /
         (2.0 * static_cast<double>(length_ * shape_.num_kv_heads * shape_.head_dim));
}

at::Tensor LowRankLayerCache::reconstructed_keys() const {
  const at::Tensor x = key_block_as_stored(0, length_);
  return key_proj_->rotated ? rope_->unapply(x, positions()) : x;
}

at::Tensor LowRankLayerCache::reconstructed_values() const {
  int64_t r = 0;
  const at::Tensor c = value_.padded(0, length_, &r, options_.dtype().toScalarType());
  return value_proj_->rebuild(c, shape_.num_kv_heads, shape_.head_dim);
}

}  // namespace kvc::lowrank
