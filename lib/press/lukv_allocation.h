#pragma once
// LU-KV's head-level budget allocation (Tang et al. 2026, arXiv:2602.08585), the offline half: how much of
// a head's long-horizon utility (its oracle importance, lukv_profile.h) a budget keeps when the head keeps
// its entries in the order of a press's scores, the upper concave envelope of that curve (the paper's
// convex-hull relaxation), and the greedy allocation of a total budget by marginal utility over the
// envelopes, which is optimal for concave curves. Budgets are in units of 1/grid of a head's entries.
#include <ATen/ATen.h>

#include <vector>

namespace kvc {

// Utility curves [N, grid + 1] float64 of N heads: entry g is the share of the head's oracle mass
// (oracle [N, S], >= 0) held by its round(g·S/grid) best entries by `ranking` [N, S] (higher first; ties
// to the older entry); 0 at g = 0, 1 at g = grid (a head with no oracle mass counts every budget as 1).
at::Tensor retained_oracle_share(const at::Tensor& ranking, const at::Tensor& oracle, int64_t grid);

// The least concave majorant of the points (g, u[g]), g = 0..n−1, evaluated at every g.
std::vector<double> upper_concave_envelope(const std::vector<double>& u);

// Budget units of each head [N] int64 summing to `total_units` (at most N·grid) that maximise the
// sum of the heads' envelopes: the units go one by one to the head whose next unit gains the most on its
// envelope (ties to the lower head index).
at::Tensor allocate_budget_units(const at::Tensor& utility, int64_t total_units);

// LU-KV's budget curve: for each target compression ratio t/100, t = 1..99, the share of each head's
// entries it prunes [99, N] float64 (rows as kvpress' LUKVPress indexes them: row round(100·r) − 1).
at::Tensor lukv_prune_curve(const at::Tensor& utility);

// Entries each of a layer's KV heads keeps of `length` for prune shares [KV], as kvpress' LUKVPress rounds
// them: floor((1 − prune)·length), the rest of the rounded total to the largest fractional parts, each
// within [1, length].
std::vector<int64_t> lukv_head_keep(const at::Tensor& prune, int64_t length);

}  // namespace kvc
