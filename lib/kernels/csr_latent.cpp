#include "kernels/csr_latent.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"
#include "kernels/vector_ops.h"
#include "runtime/parallel_grain.h"
#include "util/error.h"

namespace kvc {
namespace {

// Latent widths are padded to whole AVX2 registers (the padding holds zeros on both sides).
constexpr int64_t kLanes = 8;
int64_t padded_width(int64_t r) { return (r + kLanes - 1) / kLanes * kLanes; }

// One token's n coefficients widened to the compute type, then zeros up to the padded width.
template <typename Stored, typename Compute>
void widen(const Stored* src, int64_t n, Compute* dst) {
  if constexpr (std::is_same_v<Stored, Compute>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(Compute));
  } else {
    for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<Compute>(static_cast<float>(src[j]));
  }
  std::fill(dst + n, dst + padded_width(n), Compute(0));
}

// Tokens are read in tiles of kTile, each widened to the compute type into a zero-padded block (unless
// it is already in that form: use_in_place), so that the AVX2 loops run over whole registers and reuse
// every load several times. Within a tile, each group of tokens (four when scoring, one when weighing)
// is as wide as its own largest rank: a few high-rank tokens among adaptive ranks neither widen the
// work on the rest of their tile nor the block written.
constexpr int64_t kTile = 64;

// A tile's tokens k = 0..n-1: token k's row at rows[offset[k]], width[k] wide (its group's largest
// rank rounded up, zeros after its own rank); rank[k] is its own rank. rows points into `values` (the
// widened copy) or, where no widening is needed, at the stored coefficients themselves.
template <typename Compute>
struct Tile {
  std::vector<Compute> values;
  const Compute* rows = nullptr;
  int64_t offset[kTile], width[kTile], rank[kTile];
};

// Tokens [t0, t0 + n) used in place: stored as computed, whole groups, one rank throughout that is
// already a multiple of `multiple` (a fixed rank: every row is as the kernels would widen it). Saves a
// copy of every coefficient each decode step. Adaptive ranks are widened: reading them in place, with
// each row's last register loaded under a mask, was slower than the copy.
template <typename Stored, typename Compute>
bool use_in_place(const CsrCoefficients& c, const Stored* flat, int64_t t0, int64_t n, int64_t group, int64_t multiple,
                  Tile<Compute>& tile) {
  if constexpr (!std::is_same_v<Stored, Compute>) {
    return false;
  } else {
    const int64_t r = c.offsets[t0 + 1] - c.offsets[t0];
    if (n % group != 0 || r == 0 || r % multiple != 0) return false;
    for (int64_t k = 1; k < n; ++k) {
      if (c.offsets[t0 + k + 1] - c.offsets[t0 + k] != r) return false;
    }
    tile.rows = flat + c.offsets[t0];
    for (int64_t k = 0; k < n; ++k) {
      tile.rank[k] = tile.width[k] = r;
      tile.offset[k] = k * r;
    }
    return true;
  }
}

// Tokens [t0, t0 + n) widened group by group: the `group` tokens from k0 lie one after another at their
// group's width (the group's largest rank rounded up to `multiple`); rows past n complete the last group
// with zeros. values must hold round_up(n, group) rows of the widest group.
template <typename Stored, typename Compute>
void widen_tile(const CsrCoefficients& c, const Stored* flat, int64_t t0, int64_t n, int64_t group, int64_t multiple,
                Tile<Compute>& tile) {
  if (use_in_place(c, flat, t0, n, group, multiple, tile)) return;
  for (int64_t k = 0; k < n; ++k) tile.rank[k] = c.offsets[t0 + k + 1] - c.offsets[t0 + k];
  Compute* values = tile.values.data();
  tile.rows = values;
  int64_t pos = 0;
  for (int64_t k0 = 0; k0 < n; k0 += group) {
    int64_t r = 0;
    for (int64_t k = k0; k < std::min(n, k0 + group); ++k) r = std::max(r, tile.rank[k]);
    const int64_t w = (r + multiple - 1) / multiple * multiple;
    for (int64_t k = k0; k < k0 + group; ++k) {
      Compute* row = values + pos + (k - k0) * w;
      if (k >= n) {
        std::fill(row, row + w, Compute(0));
        continue;
      }
      widen(flat + c.offsets[t0 + k], tile.rank[k], row);
      std::fill(row + padded_width(tile.rank[k]), row + w, Compute(0));
      tile.offset[k] = pos + (k - k0) * w;
      tile.width[k] = w;
    }
    pos += group * w;
  }
}

// The stored coefficients of the tile a thread computes next, requested a cache line at a time spread
// over the current tile's work. The kernels read a tile in place a register column at a time across its
// tokens (weighing) or four tokens at a time (scoring), and widening copies it token by token: patterns
// the hardware prefetcher does not run far enough ahead of, which left the kernels waiting on memory.
class NextTilePrefetch {
 public:
  // The tile from token t0 of c, when the thread has one (`exists`); else nothing is prefetched.
  template <typename Stored>
  NextTilePrefetch(const CsrCoefficients& c, const Stored* flat, int64_t t0, bool exists) {
    if (!exists || t0 >= c.count) return;
    const int64_t n = std::min(kTile, c.count - t0);
    begin_ = reinterpret_cast<const char*>(flat + c.offsets[t0]);
    lines_ = ((c.offsets[t0 + n] - c.offsets[t0]) * static_cast<int64_t>(sizeof(Stored)) + 63) / 64;
  }
  // One line every iterations / lines calls of tick().
  void spread_over(int64_t iterations) {
    every_ = countdown_ = lines_ > 0 ? std::max<int64_t>(1, iterations / lines_) : iterations + 1;
  }
  void tick() {
    if (--countdown_ > 0) return;
    countdown_ = every_;
    if (line_ < lines_) __builtin_prefetch(begin_ + 64 * line_++, 0, 3);
  }

 private:
  const char* begin_ = nullptr;
  int64_t lines_ = 0, line_ = 0, every_ = 1, countdown_ = 1;
};

#if defined(__x86_64__)
// out[i, t0 + k] = tile[k] · q[i] for the tile's n tokens, in groups of four. q has an even number of
// rows (a zero row after an odd R). Two rows by four tokens per pass: six loads for eight multiply-adds.
KVC_AVX2 void scores_tile_avx2(const Tile<float>& tile, int64_t n, const float* q, int64_t q_stride, int64_t R,
                               float* out, int64_t count, int64_t t0, NextTilePrefetch& next) {
  int64_t passes = 0;
  for (int64_t k0 = 0; k0 < n; k0 += 4) passes += (R + 1) / 2 * (tile.width[k0] / kLanes);
  next.spread_over(passes);
  for (int64_t k0 = 0; k0 < n; k0 += 4) {
    const float* c = tile.rows + tile.offset[k0];
    const int64_t width = tile.width[k0];
    for (int64_t i0 = 0; i0 < R; i0 += 2) {
      const float* q0 = q + i0 * q_stride;
      const float* q1 = q0 + q_stride;
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t j = 0; j < width; j += kLanes) {
        next.tick();
        const __m256 a0 = _mm256_loadu_ps(q0 + j), a1 = _mm256_loadu_ps(q1 + j);
        for (int k = 0; k < 4; ++k) {
          const __m256 ck = _mm256_loadu_ps(c + k * width + j);
          acc[k] = _mm256_fmadd_ps(a0, ck, acc[k]);
          acc[4 + k] = _mm256_fmadd_ps(a1, ck, acc[4 + k]);
        }
      }
      alignas(32) float sums[8];
      _mm256_store_ps(sums, simd::transpose_sum8(acc));
      for (int64_t k = 0; k < 4 && k0 + k < n; ++k) {
        out[i0 * count + t0 + k0 + k] = sums[k];
        if (i0 + 1 < R) out[(i0 + 1) * count + t0 + k0 + k] = sums[4 + k];
      }
    }
  }
}

// z[i, :width] += Σ_k p[i, t0 + k] tile[k] for the tile's n tokens (one per group, rows a multiple of
// 16 wide; z's rows z_stride apart, width a multiple of 16). Four rows by sixteen columns per pass: six
// loads for eight multiply-adds. A token adds nothing past its rank, so it is skipped there.
KVC_AVX2 void weigh_tile_avx2(const Tile<float>& tile, int64_t n, int64_t width, const float* p, int64_t R,
                              int64_t count, int64_t t0, float* z, int64_t z_stride, NextTilePrefetch& next) {
  const float* values = tile.rows;
  int64_t i0 = 0;
  next.spread_over(R / 4 * (width / (2 * kLanes)) * n);
  for (; i0 + 4 <= R; i0 += 4) {
    for (int64_t j = 0; j < width; j += 2 * kLanes) {
      __m256 acc[8];
      for (auto& a : acc) a = _mm256_setzero_ps();
      for (int64_t k = 0; k < n; ++k) {
        next.tick();
        if (tile.rank[k] <= j) continue;
        const float* row = values + tile.offset[k] + j;
        const __m256 c0 = _mm256_loadu_ps(row), c1 = _mm256_loadu_ps(row + kLanes);
        for (int i = 0; i < 4; ++i) {
          const __m256 a = _mm256_broadcast_ss(p + (i0 + i) * count + t0 + k);
          acc[2 * i] = _mm256_fmadd_ps(a, c0, acc[2 * i]);
          acc[2 * i + 1] = _mm256_fmadd_ps(a, c1, acc[2 * i + 1]);
        }
      }
      for (int i = 0; i < 4; ++i) {
        float* zi = z + (i0 + i) * z_stride + j;
        _mm256_storeu_ps(zi, _mm256_add_ps(_mm256_loadu_ps(zi), acc[2 * i]));
        _mm256_storeu_ps(zi + kLanes, _mm256_add_ps(_mm256_loadu_ps(zi + kLanes), acc[2 * i + 1]));
      }
    }
  }
  for (; i0 < R; ++i0) {
    for (int64_t k = 0; k < n; ++k) {
      axpy_avx2(z + i0 * z_stride, values + tile.offset[k], p[i0 * count + t0 + k], tile.width[k]);
    }
  }
}
#endif

// rows [R, r] copied into [R_padded, width] with zeros after r and in the padding rows.
template <typename Compute>
std::vector<Compute> padded_rows(const at::Tensor& rows, int64_t R_padded, int64_t width) {
  const int64_t R = rows.size(0), r = rows.size(1);
  std::vector<Compute> out(static_cast<size_t>(R_padded * width), Compute(0));
  const Compute* src = rows.data_ptr<Compute>();
  for (int64_t i = 0; i < R; ++i) std::copy(src + i * r, src + (i + 1) * r, out.data() + i * width);
  return out;
}

template <typename Stored, typename Compute>
void scores(const CsrCoefficients& c, const at::Tensor& rows, at::Tensor& out) {
  const int64_t R = rows.size(0), width = padded_width(rows.size(1)), count = c.count;
  const std::vector<Compute> q = padded_rows<Compute>(rows, R + R % 2, width);
  const Stored* flat = c.flat.data_ptr<Stored>();
  Compute* o = out.data_ptr<Compute>();
  const bool avx2 = std::is_same_v<Compute, float> && cpu_has_avx2_fma();
  const int64_t tiles = (count + kTile - 1) / kTile;
  at::parallel_for(0, tiles, parallel_grain(kTile * R * width), [&](int64_t begin, int64_t end) {
    Tile<Compute> tile;
    tile.values.resize(static_cast<size_t>(kTile * width));
    for (int64_t b = begin; b < end; ++b) {
      const int64_t t0 = b * kTile, n = std::min(kTile, count - t0);
      widen_tile(c, flat, t0, n, 4, kLanes, tile);
#if defined(__x86_64__)
      if constexpr (std::is_same_v<Compute, float>) {
        if (avx2) {
          NextTilePrefetch next(c, flat, t0 + n, b + 1 < end);
          scores_tile_avx2(tile, n, q.data(), width, R, o, count, t0, next);
          continue;
        }
      }
#endif
      for (int64_t k = 0; k < n; ++k) {
        const Compute* row = tile.rows + tile.offset[k];
        for (int64_t i = 0; i < R; ++i) o[i * count + t0 + k] = dot_plain(row, q.data() + i * width, tile.width[k]);
      }
    }
  });
}

template <typename Stored, typename Compute>
void weigh(const CsrCoefficients& c, const at::Tensor& probs, at::Tensor& out) {
  const int64_t R = probs.size(0), count = c.count, r = out.size(1);
  const int64_t width = (r + 2 * kLanes - 1) / (2 * kLanes) * (2 * kLanes);
  const int64_t tiles = (count + kTile - 1) / kTile;
  // Each chunk of tiles sums into its own rows, added up at the end: no two threads write one row.
  const int64_t per_chunk = std::max<int64_t>(1, parallel_grain(kTile * R * width));
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), (tiles + per_chunk - 1) / per_chunk));
  std::vector<Compute> partial(static_cast<size_t>(chunks * R * width), Compute(0));
  const Stored* flat = c.flat.data_ptr<Stored>();
  const Compute* p = probs.data_ptr<Compute>();
  const bool avx2 = std::is_same_v<Compute, float> && cpu_has_avx2_fma();
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    Tile<Compute> tile;
    tile.values.resize(static_cast<size_t>(kTile * width));
    for (int64_t ch = begin; ch < end; ++ch) {
      Compute* z = partial.data() + ch * R * width;
      const int64_t b_end = tiles * (ch + 1) / chunks;
      for (int64_t b = tiles * ch / chunks; b < b_end; ++b) {
        const int64_t t0 = b * kTile, n = std::min(kTile, count - t0);
        widen_tile(c, flat, t0, n, 1, 2 * kLanes, tile);
#if defined(__x86_64__)
        if constexpr (std::is_same_v<Compute, float>) {
          if (avx2) {
            NextTilePrefetch next(c, flat, t0 + n, b + 1 < b_end);
            weigh_tile_avx2(tile, n, width, p, R, count, t0, z, width, next);
            continue;
          }
        }
#endif
        for (int64_t k = 0; k < n; ++k) {
          const Compute* row = tile.rows + tile.offset[k];
          for (int64_t i = 0; i < R; ++i) axpy_plain(z + i * width, row, p[i * count + t0 + k], tile.width[k]);
        }
      }
    }
  });
  Compute* o = out.data_ptr<Compute>();
  for (int64_t i = 0; i < R; ++i) {
    for (int64_t j = 0; j < r; ++j) {
      Compute s = 0;
      for (int64_t k = 0; k < chunks; ++k) s += partial[static_cast<size_t>((k * R + i) * width + j)];
      o[i * r + j] = s;
    }
  }
}

// Calls f.template operator()<Stored, Compute>() for the coefficients' and the rows' types.
template <typename F>
void dispatch(const at::Tensor& flat, const at::Tensor& rows, F&& f) {
  KVC_CHECK(flat.device().is_cpu() && rows.device().is_cpu() && flat.is_contiguous() && rows.is_contiguous(),
            "csr latent kernels: contiguous CPU tensors expected");
  const auto with_compute = [&](auto stored_tag) {
    using Stored = decltype(stored_tag);
    if (rows.scalar_type() == at::kFloat) return f(Stored{}, float{});
    KVC_CHECK(rows.scalar_type() == at::kDouble, "csr latent kernels: float32 or float64 rows expected, got {}",
              c10::toString(rows.scalar_type()));
    return f(Stored{}, double{});
  };
  switch (flat.scalar_type()) {
    case at::kFloat: return with_compute(float{});
    case at::kHalf: return with_compute(at::Half{});
    case at::kBFloat16: return with_compute(at::BFloat16{});
    case at::kDouble: return with_compute(double{});
    default: fail("csr latent kernels: coefficients of type {} are not supported", c10::toString(flat.scalar_type()));
  }
}

}  // namespace

at::Tensor csr_latent_scores(const CsrCoefficients& coefficients, const at::Tensor& rows) {
  KVC_CHECK(rows.dim() == 2, "csr_latent_scores: rows must be [R, r]");
  at::Tensor out = at::empty({rows.size(0), coefficients.count}, rows.options());
  dispatch(coefficients.flat, rows,
           [&](auto stored, auto compute) { scores<decltype(stored), decltype(compute)>(coefficients, rows, out); });
  return out;
}

at::Tensor csr_latent_weigh(const CsrCoefficients& coefficients, const at::Tensor& probs, int64_t r) {
  KVC_CHECK(probs.dim() == 2 && probs.size(1) == coefficients.count, "csr_latent_weigh: probs must be [R, {}]",
            coefficients.count);
  at::Tensor out = at::empty({probs.size(0), r}, probs.options());
  dispatch(coefficients.flat, probs,
           [&](auto stored, auto compute) { weigh<decltype(stored), decltype(compute)>(coefficients, probs, out); });
  return out;
}

}  // namespace kvc
