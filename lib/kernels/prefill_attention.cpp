#include "kernels/prefill_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/attention_tiles.h"
#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"
#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
// row[lo, hi) <- exp(row - max), everything else in row[0, n) 0; returns the sum of the exponentials.
KVC_AVX2 float exponentiate_range(float* row, int64_t n, int64_t lo, int64_t hi, float max) {
  std::fill(row, row + lo, 0.0f);
  std::fill(row + hi, row + n, 0.0f);
  return simd::exp_shifted(row + lo, hi - lo, max);
}

struct Plan {
  const float* queries;      // [H, T, d] contiguous
  const int64_t* q_pos;      // [T]
  const float* packed_keys;  // [KV, S_pad, d] as key panels
  const float* values;       // head h row s at values + h * v_head_stride + s * v_row_stride
  int64_t v_head_stride, v_row_stride;
  const int64_t* k_pos;      // [KV, S]
  std::vector<char> sorted;  // per KV head: positions ascending (an uncompressed or evicted-in-order cache)
  int64_t H, T, KV, S, S_pad, d, window;
  float scale;
  float* out;                     // [H, T, d] contiguous
  int64_t window_rows = 0;        // probability rows kept for the last window_rows queries
  float* window_probs = nullptr;  // [H, window_rows, S], zero-initialised
};

// Visible key range [lo, hi) of a query at q_pos over KV head h (whole cache if unsorted).
void visible_range(const Plan& p, int64_t h, int64_t q, int64_t& lo, int64_t& hi) {
  if (!p.sorted[h]) {
    lo = 0;
    hi = p.S;
    return;
  }
  const int64_t* k_pos = p.k_pos + h * p.S;
  hi = std::upper_bound(k_pos, k_pos + p.S, q) - k_pos;
  lo = p.window > 0 ? std::upper_bound(k_pos, k_pos + hi, q - p.window) - k_pos : 0;
}

// The micro-kernels for 1..6 rows, chosen at run time for the last, partial tile.
using ScoreTile = void (*)(const float*, int64_t, const float*, int64_t, float, float*, int64_t);
using ValueTile = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t);
constexpr ScoreTile kScoreTiles[] = {nullptr,
                                     tiles::score_tile<1>,
                                     tiles::score_tile<2>,
                                     tiles::score_tile<3>,
                                     tiles::score_tile<4>,
                                     tiles::score_tile<5>,
                                     tiles::score_tile<6>};
constexpr ValueTile kValueTiles16[] = {nullptr,
                                       tiles::value_tile<1, 2>,
                                       tiles::value_tile<2, 2>,
                                       tiles::value_tile<3, 2>,
                                       tiles::value_tile<4, 2>,
                                       tiles::value_tile<5, 2>,
                                       tiles::value_tile<6, 2>};
constexpr ValueTile kValueTiles8[] = {nullptr,
                                      tiles::value_tile<1, 1>,
                                      tiles::value_tile<2, 1>,
                                      tiles::value_tile<3, 1>,
                                      tiles::value_tile<4, 1>,
                                      tiles::value_tile<5, 1>,
                                      tiles::value_tile<6, 1>};

// Tiles per block: a chunk of packed keys and values is brought into L1 once and used by every tile of
// the block, so L3 traffic per FLOP falls by this factor.
constexpr int64_t kTilesPerBlock = 4;
// Keys per chunk: the block's scores for one chunk (24 x 128 floats), the chunk's packed keys and its
// values stay in L1/L2; the full score rows never exist (online softmax, as in FlashAttention).
constexpr int64_t kChunk = 128;
// Column-sum stripes per query head: enough tasks to balance the threads, each with its own sums.
constexpr int64_t kStatisticsStripes = 8;

struct Tile {
  int64_t t0, rows, lo[tiles::kMaxRows], hi[tiles::kMaxRows], span_lo, span_hi;  // span: union of row ranges
};

struct RowState {
  float max = -std::numeric_limits<float>::infinity(), sum = 0.0f;
};

constexpr int64_t kBlockRows = kTilesPerBlock * tiles::kMaxRows;

// A block's exponentiated scores over every chunk it visits (row stride `stride`), and each row's
// running maximum when a chunk was exponentiated: with the row's final maximum and sum, a chunk's
// probabilities are its kept values times one factor.
struct KeptScores {
  int64_t stride = 0, max_chunks = 0;
  std::vector<float> rows;       // [kBlockRows, stride]
  std::vector<float> chunk_max;  // [kBlockRows, max_chunks]
  float* column_sums = nullptr;  // this task's partial sums [S], or null when not asked for
  KeptScores(int64_t S_pad, int64_t chunks)
      : stride(S_pad),
        max_chunks(chunks),
        rows(static_cast<size_t>(kBlockRows * S_pad)),
        chunk_max(static_cast<size_t>(kBlockRows * chunks)) {}
};

// dst[0, n) += f * src[0, n), or dst = f * src with `assign`.
KVC_AVX2 void scaled_rows(float* dst, const float* src, int64_t n, float f, bool assign) {
  const __m256 a = _mm256_set1_ps(f);
  int64_t i = 0;
  if (assign) {
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(dst + i, _mm256_mul_ps(a, _mm256_loadu_ps(src + i)));
    for (; i < n; ++i) dst[i] = f * src[i];
  } else {
    for (; i + 8 <= n; i += 8) {
      _mm256_storeu_ps(dst + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(src + i), _mm256_loadu_ps(dst + i)));
    }
    for (; i < n; ++i) dst[i] += f * src[i];
  }
}

// One row's scores in chunk [c0, c0 + n): exp(x - running max) inside [lo, hi), 0 elsewhere; rescales the
// row's partial output and sum when the running maximum grows.
KVC_AVX2 void update_row(float* row, int64_t n, int64_t lo, int64_t hi, RowState& state, float* out, int64_t d) {
  lo = std::max<int64_t>(lo, 0), hi = std::min(hi, n);
  if (lo >= hi) {
    std::fill(row, row + n, 0.0f);
    return;
  }
  const float chunk_max = simd::max_of(row + lo, hi - lo);
  if (chunk_max == -std::numeric_limits<float>::infinity()) {  // every entry masked (unsorted positions)
    std::fill(row, row + n, 0.0f);
    return;
  }
  if (chunk_max > state.max) {
    const float alpha = std::exp(state.max - chunk_max);  // 0 while nothing was seen
    state.sum *= alpha;
    const __m256 a = _mm256_set1_ps(alpha);
    for (int64_t c = 0; c < d; c += 8) _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_loadu_ps(out + c), a));
    state.max = chunk_max;
  }
  state.sum += exponentiate_range(row, n, lo, hi, state.max);
}

// Queries t0 .. t0 + rows - 1 of query head `head` (KV head h), in tiles of up to 6 rows, key chunk by
// key chunk: scores, online softmax, P V accumulated into the outputs, normalised at the end. With
// `kept`, the exponentiated scores of every chunk stay in it and the block's statistics are added.
KVC_AVX2 void attend_block(const Plan& p, int64_t head, int64_t t0, int64_t rows, KeptScores* kept) {
  const int64_t h = head / (p.H / p.KV), d = p.d;
  Tile tiles_[kTilesPerBlock];
  const int64_t n_tiles = (rows + tiles::kMaxRows - 1) / tiles::kMaxRows;
  int64_t block_lo = p.S, block_hi = 0;
  for (int64_t k = 0; k < n_tiles; ++k) {
    Tile& tile = tiles_[k];
    tile.t0 = t0 + k * tiles::kMaxRows;
    tile.rows = std::min<int64_t>(tiles::kMaxRows, t0 + rows - tile.t0);
    tile.span_lo = p.S, tile.span_hi = 0;
    for (int64_t r = 0; r < tile.rows; ++r) {
      visible_range(p, h, p.q_pos[tile.t0 + r], tile.lo[r], tile.hi[r]);
      if (tile.lo[r] < tile.hi[r]) {
        tile.span_lo = std::min(tile.span_lo, tile.lo[r]);
        tile.span_hi = std::max(tile.span_hi, tile.hi[r]);
      }
    }
    if (tile.span_lo < tile.span_hi) {
      block_lo = std::min(block_lo, tile.span_lo);
      block_hi = std::max(block_hi, tile.span_hi);
    }
  }
  float* out = p.out + (head * p.T + t0) * d;
  std::fill(out, out + rows * d, 0.0f);
  RowState state[kBlockRows];
  alignas(32) float chunk_scores[kBlockRows * kChunk];
  const float* queries = p.queries + (head * p.T + t0) * d;
  const float* panels = p.packed_keys + h * p.S_pad * d;
  const float* values = p.values + h * p.v_head_stride;
  const int64_t stride = kept != nullptr ? kept->stride : kChunk;  // of the score rows
  const int64_t first_c0 = block_lo / tiles::kPanel * tiles::kPanel;
  for (int64_t c0 = first_c0, chunk = 0; c0 < block_hi; c0 += kChunk, ++chunk) {
    const int64_t c1 = std::min(c0 + kChunk, block_hi);
    // Score column c0 of this chunk: the chunk's own buffer, or column c0 of the kept rows.
    float* scores = kept != nullptr ? kept->rows.data() + c0 : chunk_scores;
    for (int64_t k = 0; k < n_tiles; ++k) {
      const Tile& tile = tiles_[k];
      const int64_t s_lo = std::max(c0, tile.span_lo), s_hi = std::min(c1, tile.span_hi);
      if (s_lo >= s_hi) continue;
      const int64_t r0 = k * tiles::kMaxRows;
      float* tile_scores = scores + r0 * stride;
      for (int64_t p0 = s_lo / tiles::kPanel * tiles::kPanel; p0 < s_hi; p0 += tiles::kPanel) {
        kScoreTiles[tile.rows](queries + r0 * d, d, panels + p0 * d, d, p.scale, tile_scores + (p0 - c0), stride);
      }
      for (int64_t r = 0; r < tile.rows; ++r) {
        float* row = tile_scores + r * stride + (s_lo - c0);
        if (!p.sorted[h]) {  // compressed cache: mask entries this query must not see
          const int64_t* k_pos = p.k_pos + h * p.S;
          const int64_t q = p.q_pos[tile.t0 + r];
          for (int64_t s = s_lo; s < s_hi; ++s) {
            if (!(k_pos[s] <= q && (p.window <= 0 || k_pos[s] > q - p.window))) {
              row[s - s_lo] = -std::numeric_limits<float>::infinity();
            }
          }
        }
        update_row(row, s_hi - s_lo, tile.lo[r] - s_lo, tile.hi[r] - s_lo, state[r0 + r], out + (r0 + r) * d, d);
        if (kept != nullptr) kept->chunk_max[(r0 + r) * kept->max_chunks + chunk] = state[r0 + r].max;
      }
      const float* probs = tile_scores + (s_lo - c0);
      const float* v = values + s_lo * p.v_row_stride;
      int64_t c = 0;
      for (; c + 16 <= d; c += 16) {
        kValueTiles16[tile.rows](probs, stride, v + c, p.v_row_stride, s_hi - s_lo, out + r0 * d + c, d);
      }
      if (c < d) kValueTiles8[tile.rows](probs, stride, v + c, p.v_row_stride, s_hi - s_lo, out + r0 * d + c, d);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const float inv = state[r].sum > 0.0f ? 1.0f / state[r].sum : 0.0f;
    for (int64_t c = 0; c < d; ++c) out[r * d + c] *= inv;
  }
  if (kept == nullptr) return;
  // Statistics: row r's probabilities in chunk k are its kept values x exp(max then - final max) / sum.
  // Only the row's visible range is read; inside it every chunk's values were written above.
  for (int64_t r = 0; r < rows; ++r) {
    if (!(state[r].sum > 0.0f)) continue;  // nothing visible: no probabilities
    const Tile& tile = tiles_[r / tiles::kMaxRows];
    const int64_t lo = tile.lo[r % tiles::kMaxRows], hi = tile.hi[r % tiles::kMaxRows], t = t0 + r;
    float* window_row =
        t >= p.T - p.window_rows ? p.window_probs + (head * p.window_rows + t - (p.T - p.window_rows)) * p.S : nullptr;
    if (kept->column_sums == nullptr && window_row == nullptr) continue;
    const float inv = 1.0f / state[r].sum;
    for (int64_t c0 = first_c0, chunk = 0; c0 < block_hi; c0 += kChunk, ++chunk) {
      const int64_t a = std::max(c0, lo), b = std::min(std::min(c0 + kChunk, block_hi), hi);
      if (a >= b) continue;
      const float f = std::exp(kept->chunk_max[r * kept->max_chunks + chunk] - state[r].max) * inv;
      const float* e = kept->rows.data() + r * kept->stride + a;
      if (kept->column_sums != nullptr) scaled_rows(kept->column_sums + a, e, b - a, f, false);
      if (window_row != nullptr) scaled_rows(window_row + a, e, b - a, f, true);
    }
  }
}
#endif

}  // namespace

at::Tensor fast_prefill_attention(const at::Tensor& queries, const at::Tensor& q_positions, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                  PrefillStatistics* statistics) {
#if defined(__x86_64__)
  const auto is_cpu_float = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  if (!cpu_has_avx2_fma() || !is_cpu_float(queries) || !is_cpu_float(keys) || !is_cpu_float(values) ||
      queries.dim() != 3 || keys.dim() != 3 || values.sizes() != keys.sizes() || keys.size(1) == 0 ||
      key_positions.scalar_type() != at::kLong || !key_positions.device().is_cpu() ||
      q_positions.scalar_type() != at::kLong || !q_positions.device().is_cpu() ||
      records_gradient({queries, keys, values})) {
    return {};
  }
  const int64_t H = queries.size(0), T = queries.size(1), KV = keys.size(0), S = keys.size(1), d = keys.size(2);
  if (KV == 0 || H % KV != 0 || queries.size(2) != d || d % 8 != 0 || keys.stride(2) != 1 || values.stride(2) != 1) {
    return {};
  }
  const at::Tensor q = queries.contiguous();
  const at::Tensor q_pos = q_positions.contiguous();
  const at::Tensor k_pos = key_positions.contiguous();
  const int64_t S_pad = (S + tiles::kPanel - 1) / tiles::kPanel * tiles::kPanel;
  // Keys packed once per KV head and shared by every query tile (BLAS re-packed them per product).
  at::Tensor packed = at::empty({KV, S_pad, d}, keys.options());
  const float* k_data = keys.data_ptr<float>();
  at::parallel_for(0, KV, parallel_grain(S * d), [&](int64_t h0, int64_t h1) {
    for (int64_t h = h0; h < h1; ++h) {
      tiles::pack_key_panels(k_data + h * keys.stride(0), keys.stride(1), S, d,
                             packed.data_ptr<float>() + h * S_pad * d);
    }
  });
  at::Tensor out = at::empty({H, T, d}, queries.options());
  Plan plan{q.data_ptr<float>(),
            q_pos.data_ptr<int64_t>(),
            packed.data_ptr<float>(),
            values.data_ptr<float>(),
            values.stride(0),
            values.stride(1),
            k_pos.data_ptr<int64_t>(),
            std::vector<char>(KV),
            H,
            T,
            KV,
            S,
            S_pad,
            d,
            sliding_window,
            static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))),
            out.data_ptr<float>()};
  for (int64_t h = 0; h < KV; ++h) plan.sorted[h] = std::is_sorted(plan.k_pos + h * S, plan.k_pos + (h + 1) * S);
  const int64_t blocks_per_head = (T + kBlockRows - 1) / kBlockRows;
  if (statistics == nullptr) {
    // Tasks are (query head, block of 24 queries), ordered first, last, second, second-to-last, ...
    // within a head so that any contiguous share of them mixes short and long causal spans.
    const int64_t block_grain = parallel_grain(std::min(kBlockRows, T) * S * d);
    at::parallel_for(0, H * blocks_per_head, block_grain, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t head = i / blocks_per_head, j = i % blocks_per_head;
        const int64_t block = j % 2 == 0 ? j / 2 : blocks_per_head - 1 - j / 2;
        const int64_t t0 = block * kBlockRows;
        attend_block(plan, head, t0, std::min(kBlockRows, T - t0), nullptr);
      }
    });
    return out;
  }
  // With statistics, tasks are (query head, stripe): a stripe takes the pairs of blocks (first and last,
  // second and second-to-last, ...) whose index is its own modulo the stripe count, and adds its column
  // sums into its own row, so no two tasks write the same sums and the stripes are summed in order.
  plan.window_rows = std::min(statistics->window, T);
  if (plan.window_rows > 0) {
    statistics->window_probs = at::zeros({H, plan.window_rows, S}, queries.options());
    plan.window_probs = statistics->window_probs.data_ptr<float>();
  }
  const int64_t pairs = (blocks_per_head + 1) / 2;
  const int64_t stripes = std::min<int64_t>(kStatisticsStripes, pairs);
  at::Tensor partial_sums;
  if (statistics->want_column_sums) partial_sums = at::zeros({H, stripes, S}, queries.options());
  const int64_t max_chunks = S_pad / kChunk + 2;
  const int64_t stripe_grain = parallel_grain(pairs / stripes * 2 * std::min(kBlockRows, T) * S * d);
  at::parallel_for(0, H * stripes, stripe_grain, [&](int64_t i0, int64_t i1) {
    KeptScores kept(S_pad, max_chunks);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t head = i / stripes, stripe = i % stripes;
      kept.column_sums = partial_sums.defined() ? partial_sums.data_ptr<float>() + i * S : nullptr;
      for (int64_t pair = stripe; pair < pairs; pair += stripes) {
        const int64_t mirror = blocks_per_head - 1 - pair;  // the same block for the middle of an odd count
        for (const int64_t block : {pair, mirror}) {
          const int64_t t0 = block * kBlockRows, rows = std::min(kBlockRows, T - t0);
          const bool keep = kept.column_sums != nullptr || t0 + rows > T - plan.window_rows;
          attend_block(plan, head, t0, rows, keep ? &kept : nullptr);
          if (mirror == pair) break;
        }
      }
    }
  });
  if (partial_sums.defined()) statistics->column_sums = partial_sums.sum(1);
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
