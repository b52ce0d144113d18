#pragma once
// Fixed ranks under a memory budget, chosen separately for each layer's keys and values (a Palu-style
// baseline for the token-wise adaptive cache). The budget is a kept share of the full cache: the ranks
// of the searched layers may add up to share · 2 · layers · d_kv coefficients per token. Within it, the
// search maximises the summed share of explained variance, Σ_l e_K,l(r_K,l) + e_V,l(r_V,l), where
// e(r) is the share of a matrix's eigenvalues in its leading r directions. Each e is concave in r (the
// eigenvalues are sorted descending), so taking the largest next gain until the budget is spent is
// optimal; every searched layer keeps at least one direction for K and for V.
#include <cstdint>
#include <vector>

#include "lowrank/lowrank_artifacts.h"

namespace kvc::lowrank {

struct RankAllocation {
  std::vector<int64_t> keys, values;  // per layer of the artifact; 0 for layers not searched
  int64_t coefficients = 0;           // Σ over searched layers of keys + values
  double explained = 0;               // the objective: Σ of explained-variance shares
};

// `layers`: the layers the low-rank cache is built for (all of them, or a model's global layers).
// kvc::Error when the share is outside (0, 1] or too small for one direction per layer and K/V.
RankAllocation search_ranks(const Artifact& bases, const std::vector<int64_t>& layers, double kept_share);

}  // namespace kvc::lowrank
