#pragma once
// Palu's grouped low-rank decomposition (G-LRD; Chang et al. 2024, arXiv:2407.21118): the KV heads of a
// layer fall into groups of `group_size` consecutive heads, and each group's keys (values) are projected
// onto a basis of their own, spanning only that group's head dimensions. group_size = 1 is Palu's
// per-head M-LRD, group_size = n_kv its joint J-LRD (with calibration bases: kvc's plain PCA cache).
//
// The groups' bases are laid out as one block-diagonal d_kv × d_kv basis whose columns take the groups'
// directions in turn (group 0's first, group 1's first, ..., group 0's second, ...), so a fixed rank R
// keeps the leading ⌈R / G⌉ or ⌊R / G⌋ directions of each of the G groups, and R = G · r keeps r of each:
// the low-rank cache stores those R coefficients per token and rebuilds each group from its own.
//
// Two sources of a group's basis, as in Palu:
//   - the projection weights: the left singular vectors of the group's rows of W_k (W_v), largest
//     singular value first (Palu's SVD of the stacked weights; k = x W_gᵀ, so k U_r U_rᵀ is the group's
//     key restricted to the span of its r strongest directions);
//   - calibration activations: the eigenvectors of the group's block of the keys' second moment E[k kᵀ]
//     (kvc-calibrate's bases hold all its eigenpairs, so the block is U diag(λ) Uᵀ restricted to the
//     group), which minimise the group's reconstruction error on the calibration text.
#include <ATen/ATen.h>

#include <vector>

#include "lowrank/lowrank_artifacts.h"

namespace kvc::lowrank {

// One block-diagonal basis from the groups' bases (each [c, c], columns sorted strongest first, c =
// d_kv / groups), the columns interleaved as above; `strengths` (each [c], the matching eigenvalues or
// squared singular values) interleaved the same way into the result's eigenvalues.
Projection interleave_groups(const std::vector<at::Tensor>& bases, const std::vector<at::Tensor>& strengths);

// The grouped basis of a bases artifact's projection (eigenvectors U and eigenvalues of E[x xᵀ]).
Projection grouped_from_moment(const Projection& full, int64_t num_kv_heads, int64_t group_size);

// The grouped basis of one of K/V from its projection weights [d_kv, hidden] (rows = output dims).
Projection grouped_from_weight(const at::Tensor& weight, int64_t num_kv_heads, int64_t group_size);

}  // namespace kvc::lowrank
