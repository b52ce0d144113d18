#include "lowrank/lowrank_layer_cache.h"

#include <algorithm>
#include <optional>

#include "cache/blocked_attention.h"
#include "cache/capacity_growth.h"
#include "lowrank/rank_gate.h"
#include "util/error.h"

namespace kvc::lowrank {
namespace {

// Tokens whose keys are rebuilt at once: bounds the transient full-width keys to a block.
constexpr int64_t kKeyBlock = 1024;

at::Tensor to_tensor(const std::vector<int64_t>& v, at::Device device) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(device);
}

}  // namespace

at::Tensor RankedProjection::ranks(const at::Tensor& coeffs) const {
  if (!W.defined()) return at::full({coeffs.size(0)}, fixed_rank, coeffs.options().dtype(at::kLong));
  return hard_ranks(coeffs, W, b, tau);
}

at::Tensor LowRankLayerCache::Store::ranks() const {
  std::vector<int64_t> r(offsets.size() - 1);
  for (size_t t = 0; t + 1 < offsets.size(); ++t) r[t] = offsets[t + 1] - offsets[t];
  return at::tensor(r, at::TensorOptions().dtype(at::kLong));
}

void LowRankLayerCache::Store::push(const at::Tensor& padded, const std::vector<int64_t>& ranks,
                                    const at::Tensor& ranks_tensor) {
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
  const int64_t need = used() + flat.numel();
  if (!coeffs.defined() || need > coeffs.numel()) {
    // Geometric growth keeps decoding appends amortised O(1); the first append sizes exactly.
    const int64_t cap = used() == 0 ? need : std::max(need, coeffs.numel() + coeffs.numel() / 2 + 64);
    at::Tensor grown = at::empty({cap}, stored);
    if (used() > 0) grown.narrow(0, 0, used()).copy_(coeffs.narrow(0, 0, used()));
    coeffs = grown;
  }
  coeffs.narrow(0, used(), flat.numel()).copy_(flat);  // rounds to the stored type
  if (!padded.device().is_cpu()) {
    const int64_t n = static_cast<int64_t>(offsets.size()) - 1;
    if (!device_ranks.defined() || n + T > device_ranks.numel()) {
      at::Tensor grown = at::empty({std::max(n + T, n * 3 / 2 + 64)}, ranks_tensor.options());
      if (n > 0) grown.narrow(0, 0, n).copy_(device_ranks.narrow(0, 0, n));
      device_ranks = grown;
    }
    device_ranks.narrow(0, n, T).copy_(ranks_tensor);
  }
  for (int64_t t = 0; t < T; ++t) offsets.push_back(offsets.back() + ranks[static_cast<size_t>(t)]);
}

at::Tensor LowRankLayerCache::Store::padded(int64_t s0, int64_t s1, int64_t* max_rank, at::ScalarType compute) const {
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
  // Destination of every stored coefficient in the padded [n, rmax] matrix.
  std::vector<int64_t> dest(static_cast<size_t>(count));
  size_t k = 0;
  for (int64_t t = s0; t < s1; ++t) {
    for (int64_t j = 0; j < rank(t); ++j) dest[k++] = (t - s0) * rmax + j;
  }
  at::Tensor out = at::zeros({n * rmax}, coeffs.options());
  out.index_copy_(0, to_tensor(dest, coeffs.device()), coeffs.narrow(0, begin, count));
  return out.view({n, rmax}).to(compute);
}

void LowRankLayerCache::Store::keep(const std::vector<int64_t>& tokens) {
  std::vector<int64_t> src, new_offsets{0};
  int64_t r0 = -2;
  bool same = true;
  for (int64_t t : tokens) {
    for (int64_t j = offsets[t]; j < offsets[t + 1]; ++j) src.push_back(j);
    new_offsets.push_back(new_offsets.back() + rank(t));
    if (r0 == -2) r0 = rank(t);
    same = same && rank(t) == r0;
  }
  // An exactly-sized buffer: the old one is released.
  coeffs = src.empty() ? at::empty({0}, stored) : coeffs.index_select(0, to_tensor(src, coeffs.device())).clone();
  if (device_ranks.defined()) {
    device_ranks = tokens.empty() ? device_ranks.narrow(0, 0, 0).clone()
                                  : device_ranks.index_select(0, to_tensor(tokens, device_ranks.device()));
  }
  offsets = std::move(new_offsets);
  uniform_rank = same && r0 >= 0 ? r0 : (tokens.empty() ? uniform_rank : -1);
}

LowRankLayerCache::LowRankLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                                     std::shared_ptr<const RankedProjection> key,
                                     std::shared_ptr<const RankedProjection> value, CacheTypes stored)
    : shape_(shape), rope_(std::move(rope)), options_(options), key_proj_(std::move(key)), value_proj_(std::move(value)) {
  stored = stored.resolved(options_.dtype().toScalarType());
  for (const at::ScalarType t : {stored.keys, stored.values}) {
    KVC_CHECK(at::isFloatingType(t) && !is_block_format(t),
              "--lowrank stores a different number of coefficients per token, which {} blocks of 32 values do not "
              "fit; use --cache-type-k/-v f32, f16 or bf16 with --lowrank", cache_type_name(t));
  }
  key_.stored = options_.dtype(stored.keys);
  value_.stored = options_.dtype(stored.values);
  positions_ = at::empty({0}, options_.dtype(at::kLong));
}

void LowRankLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  const int64_t T = keys.size(1), dkv = shape_.num_kv_heads * shape_.head_dim;
  for (auto [store, proj, x] : {std::make_tuple(&key_, key_proj_.get(), &keys),
                                std::make_tuple(&value_, value_proj_.get(), &values)}) {
    // [n_kv, T, d] -> [T, n_kv * d]: all heads of a token form one latent vector.
    const at::Tensor coeffs = x->transpose(0, 1).reshape({T, dkv}).to(options_.dtype()).matmul(proj->U);
    const at::Tensor r = proj->ranks(coeffs);
    // A fixed rank is known on the host; a gated one is read back (the CSR offsets live on the host).
    std::vector<int64_t> ranks(static_cast<size_t>(T), proj->fixed_rank);
    if (proj->W.defined()) {
      const at::Tensor host = r.to(at::kCPU).contiguous();
      ranks.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + T);
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

at::Tensor LowRankLayerCache::rotated_key_block(int64_t s0, int64_t s1) const {
  int64_t r = 0;
  const at::Tensor coeffs = key_.padded(s0, s1, &r, options_.dtype().toScalarType());
  const int64_t n = s1 - s0, KV = shape_.num_kv_heads, d = shape_.head_dim;
  const at::Tensor x = r == 0 ? at::zeros({n, KV * d}, options_) : coeffs.matmul(key_proj_->U_inv.narrow(0, 0, r));
  return rope_->apply(x.view({n, KV, d}).transpose(0, 1), positions_.narrow(0, s0, n));
}

// The cache's entries for one attention call: keys rebuilt per block of tokens (once per call when they
// are held), values weighed in the spectral space and projected once per KV head.
class LowRankLayerCache::Entries : public EntryBlocks {
 public:
  explicit Entries(const LowRankLayerCache& cache)
      : cache_(cache),
        positions_(cache.positions().unsqueeze(0)),
        compute_(cache.options_.dtype().toScalarType()),
        value_rank_(cache.value_.max_rank()) {
    const int64_t KV = cache.shape_.num_kv_heads, d = cache.shape_.head_dim;
    // Per KV head, the rows of U_v^{-1} that map the leading value_rank_ latent dims to that head's value.
    value_back_ = cache.value_proj_->U_inv.view({KV * d, KV, d}).permute({1, 0, 2}).narrow(1, 0, value_rank_);
    const int64_t S = cache.length_, n_blocks = (S + kKeyBlock - 1) / kKeyBlock;
    // A context that fits one block is rebuilt once per call; a GPU holds every rebuilt block at once
    // (the size of a dense layer's keys), so a long prefill does not rebuild them for each query block.
    if (n_blocks == 1 || !positions_.device().is_cpu()) {
      for (int64_t s0 = 0; s0 < S; s0 += kKeyBlock) {
        held_.push_back(cache.rotated_key_block(s0, std::min(S, s0 + kKeyBlock)));
      }
    }
  }

  const at::Tensor& positions() const override { return positions_; }
  std::optional<int64_t> max_position() const override {
    if (!positions_.device().is_cpu()) return std::nullopt;
    return cache_.max_position_;
  }
  int64_t key_block() const override { return kKeyBlock; }

  at::Tensor keys(int64_t s0, int64_t s1) override {
    const auto b = static_cast<size_t>(s0 / kKeyBlock);
    if (b < held_.size()) return held_[b].narrow(1, s0 - static_cast<int64_t>(b) * kKeyBlock, s1 - s0);
    return cache_.rotated_key_block(s0, s1);
  }

  // Σ_t a_t x̂_t in the spectral space (only the leading max-rank dims can be non-zero), then projected
  // once per KV head by its slice of U_v^{-1}.
  at::Tensor weigh_values(const at::Tensor& probs) override {
    const int64_t visible = probs.size(2);
    const at::Tensor p = probs.to(compute_);
    at::Tensor z = at::zeros({cache_.shape_.num_kv_heads, probs.size(1), value_rank_}, cache_.options_);
    for (int64_t s0 = 0; s0 < visible; s0 += kKeyBlock) {
      const int64_t s1 = std::min(visible, s0 + kKeyBlock);
      int64_t r = 0;
      const at::Tensor coeffs = cache_.value_.padded(s0, s1, &r, compute_);
      if (r > 0) z.narrow(2, 0, r).add_(at::matmul(p.narrow(2, s0, s1 - s0), coeffs));
    }
    return at::bmm(z, value_back_);
  }

 private:
  const LowRankLayerCache& cache_;
  at::Tensor positions_;  // [1, S]: one latent, so one set of positions for every head
  at::ScalarType compute_;
  int64_t value_rank_;     // the largest kept value rank: the latent dims that can be non-zero
  at::Tensor value_back_;  // [KV, value_rank_, d]
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
  std::vector<int64_t> tokens(idx.size(1));
  for (int64_t i = 0; i < idx.size(1); ++i) {
    tokens[i] = idx[0][i].item<int64_t>();
    KVC_CHECK(tokens[i] >= 0 && tokens[i] < length_, "retain: index {} out of range for a cache of {} entries",
              tokens[i], length_);
  }
  key_.keep(tokens);
  value_.keep(tokens);
  positions_ = positions().index_select(0, to_tensor(tokens, positions_.device())).clone();
  length_ = static_cast<int64_t>(tokens.size());
  max_position_ = length_ > 0 && positions_.device().is_cpu() ? positions().max().item<int64_t>() : -1;
}

at::Tensor LowRankLayerCache::lengths() const {
  return at::full({shape_.num_kv_heads}, length_, at::TensorOptions().dtype(at::kLong));
}

CacheFootprint LowRankLayerCache::footprint() const {
  const auto cap = [](const Store& s) { return s.coeffs.defined() ? s.coeffs.numel() * s.element_bytes() : 0; };
  CacheFootprint f;
  f.entries = length_ * shape_.num_kv_heads;
  f.payload_bytes = key_.used() * key_.element_bytes() + value_.used() * value_.element_bytes();
  f.resident_bytes = cap(key_) + cap(value_) +
                     static_cast<int64_t>(key_.offsets.size() + value_.offsets.size()) * 8 + positions_.numel() * 8;
  return f;
}

double LowRankLayerCache::retain_rate() const {
  if (length_ == 0) return 0.0;
  return static_cast<double>(key_.used() + value_.used()) /
         (2.0 * static_cast<double>(length_ * shape_.num_kv_heads * shape_.head_dim));
}

at::Tensor LowRankLayerCache::reconstructed_keys() const {
  int64_t r = 0;
  const at::Tensor c = key_.padded(0, length_, &r, options_.dtype().toScalarType());
  const at::Tensor x = c.matmul(key_proj_->U_inv.narrow(0, 0, r));
  return x.view({length_, shape_.num_kv_heads, shape_.head_dim}).transpose(0, 1);
}

at::Tensor LowRankLayerCache::reconstructed_values() const {
  int64_t r = 0;
  const at::Tensor c = value_.padded(0, length_, &r, options_.dtype().toScalarType());
  const at::Tensor x = c.matmul(value_proj_->U_inv.narrow(0, 0, r));
  return x.view({length_, shape_.num_kv_heads, shape_.head_dim}).transpose(0, 1);
}

}  // namespace kvc::lowrank
