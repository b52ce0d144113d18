#pragma once
// A decode step's per-KV-head products with a slice of a latent basis, as plain loops: the query rows
// mapped into the key latent, and the weighed latent values mapped back to each head. ATen's batched
// product runs these by looping over the heads itself, dispatching several tensor operations per head,
// which for one query row cost more than the arithmetic.
#include <ATen/ATen.h>

namespace kvc {

// a [B, R, n] contiguous; m [B, k, n] with each head's rows contiguous (m.stride(2) == 1,
// m.stride(1) == n, any head stride). Returns [B, R, k] with out[b, i, j] = a[b, i, :] · m[b, j, :];
// undefined when the loops do not apply (not float32/float64 on the CPU, types differ, gradients).
at::Tensor per_head_dot_rows(const at::Tensor& a, const at::Tensor& m);

// z [B, R, k] contiguous; m [B, k, n] laid out as above. Returns [B, R, n] with
// out[b, i, :] = Σ_j z[b, i, j] m[b, j, :]; undefined when the loops do not apply.
at::Tensor per_head_combine_rows(const at::Tensor& z, const at::Tensor& m);

}  // namespace kvc
