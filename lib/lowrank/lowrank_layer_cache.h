#pragma once
// The variable-rank layer cache. For each token, its pre-RoPE key (and, separately, value) with all
// KV heads concatenated is projected into the spectral basis, x̃ = x U, and only the leading r_t
// coefficients are stored: r_t from the learned gate (adaptive) or a constant (fixed-rank baseline).
// Coefficients live in one flat buffer per K/V with per-token offsets (CSR), so memory really shrinks
// with the rank. Attention: keys are rebuilt per block of tokens (x̂[:r] U^{-1}[:r,:] -> heads -> RoPE
// at the token's position); values are summed in the spectral space and projected once per KV head,
// Σ_t a_t x̂_t U^{-1} = (Σ_t a_t x̂_t) U^{-1}. The latent is shared by all KV heads, so retain() only
// accepts the same tokens for every head (global per-layer eviction, e.g. SnapKV aggregated over heads).
// The coefficients are stored in the cache types' precision (--cache-type-k/-v f32, f16 or bf16) and
// widened to the compute dtype per block of tokens when read.
//
// Keys in a rotated basis (RankedProjection::rotated): the key is rotated at its position once, when it
// is appended, and its coefficients in a basis of rotated keys are stored. A query then scores every
// token in the latent space, q·k̂ = (q U^{-1}[:r, head]ᵀ)·x̂[:r], instead of rebuilding and rotating each
// key per step: the same memory, decode work proportional to the kept rank instead of to r · d_kv.
//
// Off the CPU, gated ranks are never read back while decoding: the CSR offsets then live on the device,
// a token's coefficients are scattered to them and gathered from them there, reads are padded to the
// widest append, and the host keeps only an upper bound of the coefficients used. It reads the true
// count back when that bound would pass the buffer's end, and then leaves room for kRoomTokens more
// tokens at full width: at most one read per kRoomTokens appended tokens.
#include <algorithm>
#include <memory>
#include <vector>

#include "cache/cache_types.h"
#include "cache/layer_cache.h"
#include "core/rope.h"
#include "kernels/csr_latent.h"
#include "lowrank/ranked_projection.h"

namespace kvc::lowrank {

class LowRankLayerCache : public LayerCache {
 public:
  // Tokens appended between two reads of a gated store's size off the CPU.
  static constexpr int64_t kRoomTokens = 64;

  // `options`: the compute dtype and device; `stored`: the floating types keys' and values' coefficients
  // are kept in (Undefined: the compute dtype). `offsets_on_device`: keep gated ranks where they are
  // computed even on the CPU (the GPU's layout, for tests); always so off the CPU.
  LowRankLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                    std::shared_ptr<const RankedProjection> key, std::shared_ptr<const RankedProjection> value,
                    CacheTypes stored = {}, bool offsets_on_device = false);

  void append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) override;
  at::Tensor attend(const at::Tensor& queries, const at::Tensor& q_positions, const AttentionProbe& probe,
                    AttentionStats* stats) override;
  void retain(const at::Tensor& indices) override;
  // Room for `entries` tokens: positions exactly, coefficients at the mean rank of the first append
  // (exact for a fixed rank), so a generation that reserved prompt + new tokens does not grow by half
  // on its first decoding step.
  void reserve(int64_t entries) override;
  at::Tensor lengths() const override;
  CacheFootprint footprint() const override;
  int64_t resident_bytes() const override;
  std::string layout() const override { return "low-rank"; }
  // A copy with buffers of its own and the same capacity (a shared prefill's cache handed to each setup).
  std::unique_ptr<LayerCache> clone() const override;

  int64_t size() const { return length_; }
  // Kept coefficients per token [size] int64, and their mean share of d_kv over K and V.
  at::Tensor key_ranks() const { return key_.ranks(); }
  at::Tensor value_ranks() const { return value_.ranks(); }
  double retain_rate() const;
  at::Tensor positions() const { return positions_.narrow(0, 0, length_); }
  // Rebuilt pre-RoPE keys / values [n_kv, size, d] (for tests and inspection, not used by attention).
  at::Tensor reconstructed_keys() const;
  at::Tensor reconstructed_values() const;
  // Times the host has read a gated store's size or offsets back from the device (K and V together).
  int64_t host_reads() const { return key_.host_reads + value_.host_reads; }

 private:
  // Flat coefficients of one of K/V with per-token offsets.
  struct Store {
    at::TensorOptions stored;         // dtype and device of coeffs
    at::Tensor coeffs;                // [capacity] (+1 scratch element when offsets_on_device)
    std::vector<int64_t> offsets{0};  // token t's coefficients: [offsets[t], offsets[t+1]) (host layout)
    int64_t tokens = 0;
    int64_t uniform_rank = -1;    // every token has this rank (fast path), or -1
    int64_t max_rank = 0;         // of the stored tokens; offsets_on_device: of the widest append
    int64_t reserved_tokens = 0;  // tokens the first allocation makes room for (reserve())
    at::Tensor device_ranks;      // [capacity] int64 per-token ranks, kept off the CPU only
    // The device layout (see the top of this file): offsets [token capacity + 1] on the device, an upper
    // bound of the coefficients used, and the reads of them the host made.
    bool offsets_on_device = false;
    at::Tensor device_offsets;
    int64_t used_bound = 0;
    mutable int64_t host_reads = 0;

    int64_t used() const;
    int64_t rank(int64_t t) const { return offsets[t + 1] - offsets[t]; }
    at::Tensor ranks() const;
    // Tokens [s0, s1) for the CSR kernels (CPU, host layout).
    CsrCoefficients csr(int64_t s0, int64_t s1) const { return {coeffs, offsets.data() + s0, s1 - s0}; }
    // ranks: host copy of ranks_tensor [T] (which lies on the coefficients' device); unread (empty) with
    // offsets_on_device.
    void push(const at::Tensor& coeffs_padded, const std::vector<int64_t>& ranks, const at::Tensor& ranks_tensor);
    // Tokens [s0, s1) as a zero-padded [s1 - s0, max rank] matrix of `compute`'s dtype.
    at::Tensor padded(int64_t s0, int64_t s1, int64_t* max_rank, at::ScalarType compute) const;
    void keep(const std::vector<int64_t>& tokens);
    int64_t element_bytes() const { return static_cast<int64_t>(c10::elementSize(stored.dtype().toScalarType())); }
    int64_t capacity_bytes() const;

   private:
    void push_on_device(const at::Tensor& coeffs_padded, const at::Tensor& ranks_tensor);
    // Makes room for an append of `ranks` at `width` coefficients each; reads the size back only when the
    // bound of the coefficients used would pass the buffer's end.
    void make_room_on_device(const at::Tensor& ranks, int64_t width);
    at::Tensor padded_on_device(int64_t s0, int64_t s1, at::ScalarType compute) const;
    std::vector<int64_t> host_offsets() const;
  };

  class Entries;  // what the shared attention routine reads
  // Bytes of `proj`'s matrices a decode step reads for one of K/V (CacheFootprint::step_read_bytes).
  int64_t matrix_bytes_per_step(const Store& store, const RankedProjection& proj) const;
  at::Tensor rotated_key_block(int64_t s0, int64_t s1) const;  // [n_kv, s1 - s0, d]
  // Pre-RoPE or rotated keys as stored, rebuilt from their coefficients: [n_kv, s1 - s0, d].
  at::Tensor key_block_as_stored(int64_t s0, int64_t s1) const;

  AttentionShape shape_;
  std::shared_ptr<const Rope> rope_;
  at::TensorOptions options_;
  std::shared_ptr<const RankedProjection> key_proj_, value_proj_;
  Store key_, value_;
  at::Tensor positions_;  // [capacity] int64
  int64_t length_ = 0;
  int64_t max_position_ = -1;  // of the cached entries (decoding after all of them needs no mask)
};

}  // namespace kvc::lowrank
