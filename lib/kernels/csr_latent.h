#pragma once
// Attention against coefficients kept in CSR form: token t's leading r_t latent coefficients lie at
// [offsets[t], offsets[t+1]) of a flat buffer, r_t differing from token to token. A decode step scores
// and weighs them where they lie, token by token, so no zero-padded copy of the context (and no index
// vector to build one) is made each step.
#include <ATen/ATen.h>

#include <cstdint>

namespace kvc {

// Tokens [0, count) of a flat CPU buffer (float32, float16 or bfloat16); offsets has count + 1 entries.
struct CsrCoefficients {
  at::Tensor flat;
  const int64_t* offsets = nullptr;
  int64_t count = 0;
};

// rows [R, r] (float32 or float64, contiguous, r ≥ every r_t) -> [R, count] with
// out[i, t] = Σ_{j < r_t} coeffs_t[j] rows[i, j].
at::Tensor csr_latent_scores(const CsrCoefficients& coefficients, const at::Tensor& rows);

// probs [R, count] (float32 or float64) -> [R, r] with out[i, j] = Σ_t probs[i, t] coeffs_t[j], where
// coeffs_t[j] = 0 for j ≥ r_t (r ≥ every r_t).
at::Tensor csr_latent_weigh(const CsrCoefficients& coefficients, const at::Tensor& probs, int64_t r);

}  // namespace kvc
