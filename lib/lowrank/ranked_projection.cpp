#include "lowrank/ranked_projection.h"

#include "kernels/matvec.h"
#include "kernels/parallel_linear.h"
#include "lowrank/rank_gate.h"

namespace kvc::lowrank {
namespace {

// x [T, in] times M [in, out] (+ bias [out]), M given as M or as M_rows = Mᵀ: the latter by the kernels
// that stream its rows over all threads, which a decode step's one-row products are bound by.
at::Tensor times(const at::Tensor& x, const at::Tensor& M, const at::Tensor& M_rows, const at::Tensor& bias = {}) {
  const auto plus_bias = [&](const at::Tensor& y) { return bias.defined() ? y + bias : y; };
  if (!M_rows.defined()) return plus_bias(x.matmul(M));
  if (!x.requires_grad()) {
    const at::Tensor y =
        x.size(0) == 1 ? fast_matvec(M_rows, x[0].contiguous(), bias) : parallel_linear(x, M_rows, bias);
    if (y.defined()) return x.size(0) == 1 ? y.unsqueeze(0) : y;
  }
  return plus_bias(x.matmul(M_rows.t().to(x.scalar_type())));  // a 16-bit gate is widened here
}

}  // namespace

at::Tensor RankedProjection::ranks(const at::Tensor& x, const at::Tensor& coeffs) const {
  if (!gated()) return at::full({x.size(0)}, fixed_rank, x.options().dtype(at::kLong));
  const bool own_basis = gate_U.defined() || gate_U_rows.defined();
  const at::Tensor gate_in = gate_reads_state ? x : own_basis ? times(x, gate_U, gate_U_rows) : coeffs;
  return hard_ranks_from_logits(times(gate_in, W, W_rows, b), tau);
}

at::Tensor RankedProjection::project(const at::Tensor& x, int64_t columns) const {
  const int64_t all = U_rows.defined() ? U_rows.size(0) : U.size(1);
  if (columns < 0 || columns >= all) return times(x, U, U_rows);
  // The leading rows of Uᵀ are contiguous: the product streams only them.
  return U_rows.defined() ? times(x, {}, U_rows.narrow(0, 0, columns)) : x.matmul(U.narrow(1, 0, columns));
}

at::Tensor fold_gate(const at::Tensor& basis, const at::Tensor& W) {
  return basis.to(at::kDouble).matmul(W.to(at::kDouble)).to(W.scalar_type());
}

at::Tensor RankedProjection::per_head_inverse(int64_t r, int64_t num_kv_heads, int64_t head_dim) const {
  // Held contiguous per head, so that a decode step's products read it in place (a permuted view would
  // be copied by every one).
  if (U_inv_heads.defined()) return U_inv_heads.narrow(1, 0, r);
  return U_inv.narrow(0, 0, r).view({r, num_kv_heads, head_dim}).permute({1, 0, 2});
}

at::Tensor RankedProjection::rebuild(const at::Tensor& coeffs, int64_t num_kv_heads, int64_t head_dim) const {
  const int64_t n = coeffs.size(0), r = coeffs.size(1);
  if (r == 0) return at::zeros({num_kv_heads, n, head_dim}, coeffs.options());
  // One product over all heads: U^{-1}[:r] as [r, d_kv] (a copy of r rows, not of the n coefficients
  // once per head as a broadcast product would make).
  const at::Tensor back = per_head_inverse(r, num_kv_heads, head_dim).permute({1, 0, 2}).reshape({r, -1});
  return coeffs.matmul(back).view({n, num_kv_heads, head_dim}).transpose(0, 1);
}

}  // namespace kvc::lowrank
