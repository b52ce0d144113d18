#pragma once
// The spectral projection of one of K/V for one layer: the basis the low-rank cache stores coefficients in,
// its inverse, and the gate (or fixed rank) that picks how many coefficients each token keeps.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc::lowrank {

// One of K/V for one layer, already on the cache's device and dtype. Each matrix is held in one form:
// setup keeps U, gate_U and W transposed (the *_rows fields) where the CPU's row-streaming products
// apply, and U_inv per KV head (U_inv_heads); tests may fill the plain forms instead.
struct RankedProjection {
  at::Tensor U, U_inv;     // [d_kv, d_kv]: the basis coefficients are stored in (U may hold only the
                           // leading fixed_rank columns)
  at::Tensor U_inv_heads;  // [n_kv, d_kv, head_dim]: U_inv's columns per KV head, contiguous
  at::Tensor W, b;         // the gate; undefined for a fixed rank
  at::Tensor gate_U;       // the basis the gate was trained on, when it is not U (rotated keys); else undefined
  // W already holds the gate's basis (fold_gate): the gate reads the state itself, so a token's ranks
  // are known before it is projected and only its kept coefficients are computed.
  bool gate_reads_state = false;
  at::Tensor U_rows, gate_U_rows, W_rows;  // U, gate_U and W transposed ([out, in], contiguous)
  bool rotated = false;                    // keys only: U is a basis of RoPE-rotated keys
  int64_t fixed_rank = 0;
  double tau = 0.1;
  bool gated() const { return W.defined() || W_rows.defined(); }
  // Whether ranks() needs no coefficients (a fixed rank, or a folded gate).
  bool ranks_first() const { return !gated() || gate_reads_state; }
  // Ranks [T] int64 for states x [T, d_kv] whose coefficients are `coeffs` (undefined when ranks_first()),
  // on their device.
  at::Tensor ranks(const at::Tensor& x, const at::Tensor& coeffs) const;
  // x [T, d_kv] -> its leading `columns` coefficients [T, columns] (all of U's columns when negative).
  at::Tensor project(const at::Tensor& x, int64_t columns = -1) const;
  // Coefficients [n, r] (the leading r latent dims) -> states [n_kv, n, head_dim].
  at::Tensor rebuild(const at::Tensor& coeffs, int64_t num_kv_heads, int64_t head_dim) const;
  // U^{-1}'s rows mapping the leading r latent dims to each KV head: [n_kv, r, head_dim].
  at::Tensor per_head_inverse(int64_t r, int64_t num_kv_heads, int64_t head_dim) const;
};

// A gate trained on the coefficients x B as one matrix on the state x: (x B) W = x (B W), formed in
// float64. The logits are those of the gate up to rounding, for one product per token instead of two.
at::Tensor fold_gate(const at::Tensor& basis, const at::Tensor& W);

}  // namespace kvc::lowrank
