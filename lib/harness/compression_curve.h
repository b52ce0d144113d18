#pragma once
// Summaries of a score–compression curve, as KVCompose (Akulov et al. 2025, §4.2) reports them:
//   - the area under the curve over the measured ratios (trapezoids), divided by the span of ratios,
//     so it reads as the mean score over the compression range, in the score's own units;
//   - the achievable compression at a tolerance ε0: the largest ratio r such that the relative drop
//     ε(r) = mean over tasks of (R(0) − R(r)) / R(0) stays within ε0 at r and at every smaller measured
//     ratio, with ε linear between measured ratios (the paper's Eq. 10 and Table 2).
// Scores are higher-is-better (accuracies); a task whose uncompressed score is 0 has no relative drop.
#include <optional>
#include <vector>

namespace kvc {

struct CurvePoint {
  double ratio = 0;  // share of the cache removed
  double score = 0;
};

// Points sorted by ratio, at least two distinct ratios; nullopt otherwise.
std::optional<double> normalised_area(const std::vector<CurvePoint>& curve);

struct Achievable {
  double ratio = 0;
  // True when ε stays within ε0 up to the largest measured ratio: the true value may be higher.
  bool at_least = false;
};

// `curves`: one per task, each starting at ratio 0 (the uncompressed score) and measured at the same
// ratios. nullopt when no task has a positive uncompressed score or the ratios differ.
std::optional<Achievable> achievable_compression(const std::vector<std::vector<CurvePoint>>& curves, double tolerance);

}  // namespace kvc
