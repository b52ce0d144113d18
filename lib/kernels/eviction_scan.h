#pragma once
// The scans a bounded press makes over each head's row at every decode step, to pick the entry it
// evicts: the ends of the row's positions, how many lie past a threshold, the protected scores, and the
// least score. Each is one pass over a row of a few hundred to a few thousand entries, per head and per
// layer; the rows come back from memory cold after the step has streamed the weights. AVX2 where the
// CPU has it, else plain loops with the same results.
#include <cstdint>

namespace kvc {

struct PositionRange {
  int64_t oldest;
  int64_t newest;
};

// The least and greatest of positions[0, n), n >= 1.
PositionRange position_range(const int64_t* positions, int64_t n);

// How many of positions[0, n) are >= at_least, and how many are <= at_most.
struct PositionCounts {
  int64_t at_least;
  int64_t at_most;
};
PositionCounts count_positions(const int64_t* positions, int64_t n, int64_t at_least, int64_t at_most);

// The scores with the row's ends protected, as protect_ends gives them: out[i] = 2 * protected_score where
// positions[i] <= oldest, else positions[i] + protected_score where positions[i] >= newest, else
// scores[i]. Positions must lie in [0, 2^52), where the AVX2 widening to double is exact.
void mark_protected(const int64_t* positions, const double* scores, double* out, int64_t n, int64_t newest,
                    int64_t oldest, double protected_score);

// The index of the least of x[0, n), n >= 1, as at::argmin gives it: the first minimum, and the first NaN
// if there is one.
int64_t first_argmin(const double* x, int64_t n);

}  // namespace kvc
