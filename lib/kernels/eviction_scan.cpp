#include "kernels/eviction_scan.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
KVC_AVX2 PositionRange position_range_avx2(const int64_t* p, int64_t n) {
  PositionRange r{p[0], p[0]};
  int64_t i = 0;
  if (n >= 4) {
    __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), hi = lo;
    for (i = 4; i + 4 <= n; i += 4) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
      lo = _mm256_blendv_epi8(lo, a, _mm256_cmpgt_epi64(lo, a));
      hi = _mm256_blendv_epi8(hi, a, _mm256_cmpgt_epi64(a, hi));
    }
    alignas(32) int64_t lows[4], highs[4];
    _mm256_store_si256(reinterpret_cast<__m256i*>(lows), lo);
    _mm256_store_si256(reinterpret_cast<__m256i*>(highs), hi);
    for (int k = 0; k < 4; ++k) {
      r.oldest = std::min(r.oldest, lows[k]);
      r.newest = std::max(r.newest, highs[k]);
    }
  }
  for (; i < n; ++i) {
    r.oldest = std::min(r.oldest, p[i]);
    r.newest = std::max(r.newest, p[i]);
  }
  return r;
}

KVC_AVX2 PositionCounts count_positions_avx2(const int64_t* p, int64_t n, int64_t at_least, int64_t at_most) {
  // Counted as n minus the entries below at_least (above at_most): no threshold needs an offset that
  // could overflow.
  const __m256i least = _mm256_set1_epi64x(at_least), most = _mm256_set1_epi64x(at_most);
  int64_t below = 0, above = 0, i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    below += __builtin_popcount(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(least, a))));
    above += __builtin_popcount(_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(a, most))));
  }
  for (; i < n; ++i) {
    below += p[i] < at_least;
    above += p[i] > at_most;
  }
  return {n - below, n - above};
}

// A position in [0, 2^52) as a double: its bits under the exponent of 2^52, minus 2^52.
KVC_AVX2 inline __m256d widen_position(__m256i a) {
  const __m256d magic = _mm256_set1_pd(4503599627370496.0);
  return _mm256_sub_pd(_mm256_or_pd(_mm256_castsi256_pd(a), magic), magic);
}

KVC_AVX2 void mark_protected_avx2(const int64_t* p, const double* x, double* o, int64_t n, int64_t newest,
                                  int64_t oldest, double protected_score) {
  const __m256i newest_v = _mm256_set1_epi64x(newest), oldest_v = _mm256_set1_epi64x(oldest);
  const __m256d score = _mm256_set1_pd(protected_score), sink = _mm256_set1_pd(2 * protected_score);
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + i));
    const __m256d before_recent = _mm256_castsi256_pd(_mm256_cmpgt_epi64(newest_v, a));
    const __m256d after_sinks = _mm256_castsi256_pd(_mm256_cmpgt_epi64(a, oldest_v));
    __m256d v = _mm256_blendv_pd(_mm256_add_pd(widen_position(a), score), _mm256_loadu_pd(x + i), before_recent);
    v = _mm256_blendv_pd(sink, v, after_sinks);
    _mm256_storeu_pd(o + i, v);
  }
  for (; i < n; ++i) {
    double v = p[i] >= newest ? static_cast<double>(p[i]) + protected_score : x[i];
    o[i] = p[i] <= oldest ? 2 * protected_score : v;
  }
}

KVC_AVX2 int64_t first_argmin_avx2(const double* x, int64_t n) {
  if (n < 8) return -1;  // the plain loop
  __m256d least = _mm256_loadu_pd(x);
  __m256d index = _mm256_setr_pd(0, 1, 2, 3), at = index;
  __m256d unordered = _mm256_cmp_pd(least, least, _CMP_UNORD_Q);
  const __m256d four = _mm256_set1_pd(4);
  int64_t i = 4;
  for (; i + 4 <= n; i += 4) {
    at = _mm256_add_pd(at, four);
    const __m256d v = _mm256_loadu_pd(x + i);
    const __m256d lower = _mm256_cmp_pd(v, least, _CMP_LT_OQ);  // strictly: each lane keeps its first
    least = _mm256_blendv_pd(least, v, lower);
    index = _mm256_blendv_pd(index, at, lower);
    unordered = _mm256_or_pd(unordered, _mm256_cmp_pd(v, v, _CMP_UNORD_Q));
  }
  if (_mm256_movemask_pd(unordered) != 0) return -1;  // a NaN: the plain loop finds the first
  alignas(32) double values[4], indices[4];
  _mm256_store_pd(values, least);
  _mm256_store_pd(indices, index);
  int best = 0;
  for (int k = 1; k < 4; ++k)
    if (values[k] < values[best] || (values[k] == values[best] && indices[k] < indices[best])) best = k;
  double value = values[best];
  auto found = static_cast<int64_t>(indices[best]);
  for (; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (x[i] < value) value = x[i], found = i;
  }
  return found;
}
#endif

}  // namespace

PositionRange position_range(const int64_t* p, int64_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return position_range_avx2(p, n);
#endif
  PositionRange r{p[0], p[0]};
  for (int64_t i = 1; i < n; ++i) r = {std::min(r.oldest, p[i]), std::max(r.newest, p[i])};
  return r;
}

PositionCounts count_positions(const int64_t* p, int64_t n, int64_t at_least, int64_t at_most) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return count_positions_avx2(p, n, at_least, at_most);
#endif
  PositionCounts c{0, 0};
  for (int64_t i = 0; i < n; ++i) {
    c.at_least += p[i] >= at_least;
    c.at_most += p[i] <= at_most;
  }
  return c;
}

void mark_protected(const int64_t* p, const double* x, double* o, int64_t n, int64_t newest, int64_t oldest,
                    double protected_score) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) return mark_protected_avx2(p, x, o, n, newest, oldest, protected_score);
#endif
  for (int64_t i = 0; i < n; ++i) {
    double v = p[i] >= newest ? static_cast<double>(p[i]) + protected_score : x[i];
    o[i] = p[i] <= oldest ? 2 * protected_score : v;
  }
}

int64_t first_argmin(const double* x, int64_t n) {
#if defined(__x86_64__)
  if (cpu_has_avx2_fma()) {
    if (const int64_t i = first_argmin_avx2(x, n); i >= 0) return i;
  }
#endif
  int64_t best = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return i;
    if (x[i] < x[best]) best = i;
  }
  return best;
}

}  // namespace kvc
