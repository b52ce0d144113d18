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
  at::Tensor U, U_inv;  // [d_kv, d_kv]: the basis coefficients are stored in (U may hold only the
                        // leading fixed_rank columns)
  at::Tensor U_inv_heads;  // [n_kv, d_kv, head_dim]: U_inv's columns per KV head, contiguous
  at::Tensor W, b;      // the gate; undefined for a fixed rank
  at::Tensor gate_U;    // the basis the gate was trained on, when it is not U (rotated keys); else undefined
  at::Tensor U_rows, gate_U_rows, W_rows;  // U, gate_U and W transposed ([out, in], contiguous)
  bool rotated = false;  // keys only: U is a basis of RoPE-rotated keys
  int64_t fixed_rank = 0;
  double tau = 0.1;
  bool gated() const { return W.defined() || W_rows.defined(); }
  // Ranks [T] int64 for states x [T, d_kv] whose coefficients are `coeffs`, on their device.
  at::Tensor ranks(const at::Tensor& x, const at::Tensor& coeffs) const;
  // x [T, d_kv] -> coefficients [T, columns of U].
  at::Tensor project(const at::Tensor& x) const;
  // Coefficients [n, r] (the leading r latent dims) -> states [n_kv, n, head_dim].
  at::Tensor rebuild(const at::Tensor& coeffs, int64_t num_kv_heads, int64_t head_dim) const;
  // U^{-1}'s rows mapping the leading r latent dims to each KV head: [n_kv, r, head_dim].
  at::Tensor per_head_inverse(int64_t r, int64_t num_kv_heads, int64_t head_dim) const;
};

}  // namespace kvc::lowrank
