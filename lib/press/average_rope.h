#pragma once
// RoPE's rotation averaged over future positions: how ExpectedAttention and CAPKV bring statistics of
// queries taken before RoPE into the frame of the keys that queries at unknown later positions will meet.
#include <ATen/ATen.h>

namespace kvc {

class Rope;

// R̄ = (1/count) Σ_{p=first}^{first+count-1} R(p), [d, d] float64, where R(p) x is what Rope::apply does to
// x at position p (Hugging Face's rotate_half pairing: dimension i with i + d/2).
at::Tensor average_rotation(const Rope& rope, int64_t first, int64_t count);

}  // namespace kvc
