#include "lowrank/nested_basis.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kvc::lowrank {

torch::Tensor cayley_rotation(const torch::Tensor& raw) {
  const torch::Tensor skew = raw - raw.transpose(0, 1);
  const torch::Tensor eye = torch::eye(raw.size(0), raw.options());
  // I + S is invertible for every skew-symmetric S (its eigenvalues are 1 + i·t).
  return torch::linalg_solve(eye + skew, eye - skew);
}

int64_t rank_of_share(double share, int64_t d) {
  return std::clamp<int64_t>(std::llround(share * static_cast<double>(d)), 1, d);
}

int64_t nested_rank(const std::vector<double>& shares, int64_t d, uint64_t seed, int64_t step, int64_t slot,
                    int64_t layer, int which) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(step) * 7919ULL +
                      static_cast<uint64_t>(slot) * 104729ULL + static_cast<uint64_t>(layer) * 2ULL +
                      static_cast<uint64_t>(which) + 0x5DEECE66DULL);
  return rank_of_share(shares[rng() % shares.size()], d);
}

}  // namespace kvc::lowrank
