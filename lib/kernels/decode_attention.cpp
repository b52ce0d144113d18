#include "kernels/decode_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/block_isa.h"
#include "kernels/cache_rows_avx2.h"
#include "kernels/cpu_features.h"
#include "kernels/decode_attention_avx512.h"
#include "kernels/half_precision.h"
#include "kernels/row_formats.h"
#include "kernels/simd_avx2.h"
#include "kernels/stream_prefetch.h"
#include "runtime/balanced_parallel_for.h"
#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

#if defined(__x86_64__)
// A KV head's entries are attended in chunks of this many, one task each, whose softmax partials are
// merged afterwards: a model with fewer KV heads than threads (Gemma 3 has one) or a count that does not
// divide among them (SmolLM2's three on two threads) still spreads its cache over every thread. The
// chunks depend on the entry count only, so the result does not depend on the thread count.
constexpr int64_t kChunkEntries = 256;
// Query heads of a group handled per pass over a chunk's rows: each row is widened once per pass.
constexpr int64_t kGroupPass = 4;

// One task: the entries [0, n) of one chunk of one KV head, as the chunk's first rows.
struct ChunkView {
  const float* queries;      // [G, d]
  const void* keys;          // the chunk's rows in the keys' stored format
  const void* values;        // the chunk's rows in the values' stored format
  const int64_t* positions;  // [n]
  int64_t n;
  float* out;    // [G, d]: the sum of exp(score - max) v over the chunk
  float* max;    // [G]: the chunk's largest visible score (-inf when none)
  float* sum;    // [G]: its sum of exp(score - max)
  float* probs;  // row g at probs + g * probs_stride, the chunk's columns; null when not asked for
  int64_t probs_stride;
};

// The bytes from one stored row to the next.
template <typename Rows>
inline int64_t row_stride(const void* base, int64_t d) {
  return reinterpret_cast<const char*>(Rows::row(base, 1, d)) - reinterpret_cast<const char*>(Rows::row(base, 0, d));
}

// scores[g * stride + s] = scale * q_g . k_s for GN queries: KB keys at a time, GN * KB <= 8 sums
// finished by one transpose-sum, so each key row is widened once for all GN queries.
// D8 = head_dim / 8 when known at compile time (the loops then unroll), else 0.
template <int D8, int GN, typename Keys>
KVC_AVX2 void score_keys(const float* q, const void* keys, int64_t n, int64_t d_runtime, float scale, float* scores,
                         int64_t stride) {
  constexpr int KB = GN == 1 ? 8 : GN == 2 ? 4 : 2;
  const int64_t d = D8 > 0 ? D8 * 8 : d_runtime;
  using Element = typename Keys::Element;
  const int64_t row_bytes = row_stride<Keys>(keys, d);
  int64_t s = 0;
  for (; s + KB <= n; s += KB) {
    const Element* k[KB];
    for (int i = 0; i < KB; ++i) k[i] = Keys::row(keys, s + i, d);
    prefetch_ahead(k[0], KB * row_bytes);
    __m256 acc[8];
    for (auto& a : acc) a = _mm256_setzero_ps();
    for (int64_t c = 0; c < d; c += 8) {
      __m256 kv[KB];
      for (int i = 0; i < KB; ++i) kv[i] = Keys::load8(k[i], c);
      for (int g = 0; g < GN; ++g) {
        const __m256 qv = _mm256_loadu_ps(q + g * d + c);
        for (int i = 0; i < KB; ++i) acc[g * KB + i] = _mm256_fmadd_ps(kv[i], qv, acc[g * KB + i]);
      }
    }
    alignas(32) float lane[8];
    _mm256_store_ps(lane, _mm256_mul_ps(simd::transpose_sum8(acc), _mm256_set1_ps(scale)));
    for (int g = 0; g < GN; ++g) {
      for (int i = 0; i < KB; ++i) scores[g * stride + s + i] = lane[g * KB + i];
    }
  }
  for (; s < n; ++s) {
    const Element* k = Keys::row(keys, s, d);
    for (int g = 0; g < GN; ++g) {
      __m256 acc = _mm256_setzero_ps();
      for (int64_t c = 0; c < d; c += 8) acc = _mm256_fmadd_ps(Keys::load8(k, c), _mm256_loadu_ps(q + g * d + c), acc);
      scores[g * stride + s] = scale * simd::horizontal_sum(acc);
    }
  }
}

// out[g] = sum_s p[g * stride + s] v_s for GN queries, TILE * 8 columns at a time: each value row is
// widened once per pass for all GN queries, GN * TILE accumulators.
template <int D8, int GN, int TILE, typename Values>
KVC_AVX2 void weigh_values_tiled(const float* p, int64_t stride, const void* values, int64_t n, int64_t d_runtime,
                                 float* out) {
  const int64_t d = D8 > 0 ? D8 * 8 : d_runtime;
  const int64_t row_bytes = row_stride<Values>(values, d);
  for (int64_t c = 0; c < d; c += 8 * TILE) {
    __m256 acc[GN][TILE];
    for (auto& row : acc) {
      for (auto& a : row) a = _mm256_setzero_ps();
    }
    for (int64_t s = 0; s < n; ++s) {
      const auto* v = Values::row(values, s, d);
      if (c == 0) prefetch_ahead(v, row_bytes);  // the first pass reads the rows from memory, later ones from cache
      __m256 vv[TILE];
      for (int t = 0; t < TILE; ++t) vv[t] = Values::load8(v, c + 8 * t);
      for (int g = 0; g < GN; ++g) {
        const __m256 w = _mm256_broadcast_ss(p + g * stride + s);
        for (int t = 0; t < TILE; ++t) acc[g][t] = _mm256_fmadd_ps(w, vv[t], acc[g][t]);
      }
    }
    for (int g = 0; g < GN; ++g) {
      for (int t = 0; t < TILE; ++t) _mm256_storeu_ps(out + g * d + c + 8 * t, acc[g][t]);
    }
  }
}

template <int D8, int GN, typename Values>
KVC_AVX2 void weigh_values(const float* p, int64_t stride, const void* values, int64_t n, int64_t d, float* out) {
  constexpr int kTile = GN <= 2 ? 4 : 2;
  if (d % (8 * kTile) == 0) return weigh_values_tiled<D8, GN, kTile, Values>(p, stride, values, n, d, out);
  weigh_values_tiled<D8, GN, 1, Values>(p, stride, values, n, d, out);
}

// Query heads g0 .. g0 + gn of the group (gn <= kGroupPass), by the pass for that many.
template <int D8, typename Keys, typename Values>
struct GroupPass {
  KVC_AVX2 static void scores(int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale,
                              float* scores, int64_t stride) {
    switch (gn) {
      case 1: return score_keys<D8, 1, Keys>(q, keys, n, d, scale, scores, stride);
      case 2: return score_keys<D8, 2, Keys>(q, keys, n, d, scale, scores, stride);
      case 3: return score_keys<D8, 3, Keys>(q, keys, n, d, scale, scores, stride);
      default: return score_keys<D8, 4, Keys>(q, keys, n, d, scale, scores, stride);
    }
  }
  KVC_AVX2 static void values(int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d,
                              float* out) {
    switch (gn) {
      case 1: return weigh_values<D8, 1, Values>(p, stride, values, n, d, out);
      case 2: return weigh_values<D8, 2, Values>(p, stride, values, n, d, out);
      case 3: return weigh_values<D8, 3, Values>(p, stride, values, n, d, out);
      default: return weigh_values<D8, 4, Values>(p, stride, values, n, d, out);
    }
  }
};

// One chunk: scores, mask, exp(score - the chunk's max), and the values weighed by them, unnormalised.
// Entries outside the visible span at either end are not read at all (a sliding-window layer holds up
// to twice its window, in position order).
template <class Pass, typename Keys, typename Values>
KVC_AVX2 void attend_chunk(const ChunkView& t, int64_t G, int64_t d, int64_t q_position, int64_t window) {
  const auto visible = [&](int64_t p) { return p <= q_position && (window <= 0 || p > q_position - window); };
  int64_t lo = 0, hi = t.n;
  while (lo < hi && !visible(t.positions[lo])) ++lo;
  while (hi > lo && !visible(t.positions[hi - 1])) --hi;
  if (t.probs != nullptr) {
    for (int64_t g = 0; g < G; ++g) {
      std::fill(t.probs + g * t.probs_stride, t.probs + g * t.probs_stride + lo, 0.0f);
      std::fill(t.probs + g * t.probs_stride + hi, t.probs + g * t.probs_stride + t.n, 0.0f);
    }
  }
  const float neg_inf = -std::numeric_limits<float>::infinity();
  if (lo == hi) {
    std::fill(t.out, t.out + G * d, 0.0f);
    std::fill(t.max, t.max + G, neg_inf);
    std::fill(t.sum, t.sum + G, 0.0f);
    return;
  }
  const int64_t n = hi - lo;
  // Per-thread scratch that only grows: no allocation (and no zero fill) per chunk per step.
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(G * n)) scratch.resize(static_cast<size_t>(G * n));
  float* scores = scratch.data();
  const void* keys = Keys::row(t.keys, lo, d);
  const void* values = Values::row(t.values, lo, d);
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  for (int64_t g0 = 0; g0 < G; g0 += kGroupPass) {
    Pass::scores(std::min(kGroupPass, G - g0), t.queries + g0 * d, keys, n, d, scale, scores + g0 * n, n);
  }
  for (int64_t s = lo + 1; s < hi - 1; ++s) {
    if (!visible(t.positions[s])) {
      for (int64_t g = 0; g < G; ++g) scores[g * n + s - lo] = neg_inf;
    }
  }
  for (int64_t g = 0; g < G; ++g) {
    float* row = scores + g * n;
    t.max[g] = simd::max_of(row, n);  // finite: the ends are visible
    t.sum[g] = simd::exp_shifted(row, n, t.max[g]);
  }
  for (int64_t g0 = 0; g0 < G; g0 += kGroupPass) {
    Pass::values(std::min(kGroupPass, G - g0), scores + g0 * n, n, values, n, d, t.out + g0 * d);
  }
  if (t.probs != nullptr) {
    for (int64_t g = 0; g < G; ++g) std::copy_n(scores + g * n, n, t.probs + g * t.probs_stride + lo);
  }
}

// The AVX-512 passes (decode_attention_avx512.h), for rows of fp32, bf16 or f16.
template <typename Rows>
struct WideRows {
  static constexpr bool kReadable = false;
};
template <>
struct WideRows<simd::PlainCacheRows<simd::Fp32Rows>> {
  static constexpr bool kReadable = true;
  static constexpr attention_avx512::RowType kType = attention_avx512::RowType::Fp32;
};
template <>
struct WideRows<simd::PlainCacheRows<simd::Bf16Rows>> {
  static constexpr bool kReadable = true;
  static constexpr attention_avx512::RowType kType = attention_avx512::RowType::Bf16;
};
template <>
struct WideRows<simd::PlainCacheRows<simd::F16Rows>> {
  static constexpr bool kReadable = true;
  static constexpr attention_avx512::RowType kType = attention_avx512::RowType::F16;
};

template <typename Keys, typename Values>
struct WidePass {
  static void scores(int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale, float* scores,
                     int64_t stride) {
    attention_avx512::score_rows(WideRows<Keys>::kType, gn, q, keys, n, d, scale, scores, stride);
  }
  static void values(int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d, float* out) {
    attention_avx512::weigh_rows(WideRows<Values>::kType, gn, p, stride, values, n, d, out);
  }
};

using ChunkKernel = void (*)(const ChunkView&, int64_t, int64_t, int64_t, int64_t);

template <typename Keys, typename Values>
ChunkKernel chunk_kernel_sized(int64_t d) {
  if constexpr (WideRows<Keys>::kReadable && WideRows<Values>::kReadable) {
    if (block_isa() == BlockIsa::Avx512Vnni && d % 16 == 0) return attend_chunk<WidePass<Keys, Values>, Keys, Values>;
  }
  switch (d) {
    case 32: return attend_chunk<GroupPass<4, Keys, Values>, Keys, Values>;
    case 64: return attend_chunk<GroupPass<8, Keys, Values>, Keys, Values>;
    case 128: return attend_chunk<GroupPass<16, Keys, Values>, Keys, Values>;
    case 256: return attend_chunk<GroupPass<32, Keys, Values>, Keys, Values>;
    default: return attend_chunk<GroupPass<0, Keys, Values>, Keys, Values>;
  }
}

template <typename Keys>
ChunkKernel chunk_kernel_values(at::ScalarType values, int64_t d) {
  switch (values) {
    case at::kBFloat16: return chunk_kernel_sized<Keys, simd::PlainCacheRows<simd::Bf16Rows>>(d);
    case at::kHalf: return chunk_kernel_sized<Keys, simd::PlainCacheRows<simd::F16Rows>>(d);
    case kCacheQ8_0: return chunk_kernel_sized<Keys, simd::Q8_0CacheRows>(d);
    case kCacheQ4_0: return chunk_kernel_sized<Keys, simd::Q4_0CacheRows>(d);
    default: return chunk_kernel_sized<Keys, simd::PlainCacheRows<simd::Fp32Rows>>(d);
  }
}

ChunkKernel chunk_kernel(at::ScalarType keys, at::ScalarType values, int64_t d) {
  switch (keys) {
    case at::kBFloat16: return chunk_kernel_values<simd::PlainCacheRows<simd::Bf16Rows>>(values, d);
    case at::kHalf: return chunk_kernel_values<simd::PlainCacheRows<simd::F16Rows>>(values, d);
    case kCacheQ8_0: return chunk_kernel_values<simd::Q8_0CacheRows>(values, d);
    case kCacheQ4_0: return chunk_kernel_values<simd::Q4_0CacheRows>(values, d);
    default: return chunk_kernel_values<simd::PlainCacheRows<simd::Fp32Rows>>(values, d);
  }
}

// The chunks of one query head merged: out = sum_c e^(max_c - M) out_c / sum_c e^(max_c - M) sum_c,
// M the largest max_c; the probabilities rescaled by the same factors. Nothing visible: zeros.
void merge_chunks(int64_t chunks, int64_t G, int64_t d, int64_t g, const float* part_out, const float* part_max,
                  const float* part_sum, float* out, float* probs, int64_t S) {
  float M = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < chunks; ++c) M = std::max(M, part_max[c * G + g]);
  float factor[64];
  float* f = chunks <= 64 ? factor : nullptr;
  std::vector<float> heap;
  if (f == nullptr) {
    heap.resize(static_cast<size_t>(chunks));
    f = heap.data();
  }
  float total = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    const float m = part_max[c * G + g];
    f[c] = m == -std::numeric_limits<float>::infinity() ? 0.0f : chunks == 1 ? 1.0f : std::exp(m - M);
    total += f[c] * part_sum[c * G + g];
  }
  const float inv = total > 0 ? 1.0f / total : 0.0f;
  for (int64_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int64_t c = 0; c < chunks; ++c) {
    const float w = f[c] * inv;
    const float* o = part_out + (c * G + g) * d;
    if (chunks == 1) {
      for (int64_t i = 0; i < d; ++i) out[i] = o[i] * inv;
    } else if (w != 0.0f) {
      for (int64_t i = 0; i < d; ++i) out[i] += w * o[i];
    }
    if (probs != nullptr) {
      const int64_t s0 = c * kChunkEntries, s1 = std::min(S, s0 + kChunkEntries);
      for (int64_t s = s0; s < s1; ++s) probs[s] *= w;
    }
  }
}
#endif

}  // namespace

at::Tensor fast_decode_attention(const at::Tensor& queries, int64_t q_position, const at::Tensor& keys,
                                 const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window,
                                 at::Tensor* probabilities, at::ScalarType key_type, at::ScalarType value_type) {
#if defined(__x86_64__)
  if (key_type == at::ScalarType::Undefined) key_type = keys.scalar_type();
  if (value_type == at::ScalarType::Undefined) value_type = values.scalar_type();
  // Keys and values may be stored in 16 bits or in blocks (a typed cache): they are widened in registers.
  const auto is_cpu_rows = [](const at::Tensor& t, at::ScalarType type) {
    const bool readable = type == at::kFloat || is_half_type(type) || is_block_format(type);
    return readable && t.device().is_cpu() && t.scalar_type() == storage_dtype(type) && t.dim() == 3;
  };
  if (!cpu_has_avx2_fma() || !queries.device().is_cpu() || queries.scalar_type() != at::kFloat ||
      !is_cpu_rows(keys, key_type) || !is_cpu_rows(values, value_type) || queries.dim() != 3 || queries.size(1) != 1 ||
      values.size(0) != keys.size(0) || values.size(1) != keys.size(1) || key_positions.scalar_type() != at::kLong ||
      !key_positions.device().is_cpu() || records_gradient({queries, keys, values})) {
    return {};
  }
  const int64_t H = queries.size(0), KV = keys.size(0), S = keys.size(1), d = queries.size(2);
  if (KV == 0 || H % KV != 0 || d % 8 != 0 || S == 0) return {};
  const int64_t key_width = stored_row_width(key_type, d), value_width = stored_row_width(value_type, d);
  if ((is_block_format(key_type) || is_block_format(value_type)) && d % kRowBlockValues != 0) return {};
  const bool rows_contiguous = keys.size(2) == key_width && values.size(2) == value_width && keys.stride(2) == 1 &&
                               keys.stride(1) == key_width && values.stride(2) == 1 &&
                               values.stride(1) == value_width && key_positions.stride(1) == 1;
  if (!rows_contiguous) return {};
  const int64_t G = H / KV;
  const at::Tensor q = queries.contiguous();
  at::Tensor out = at::empty({H, 1, d}, queries.options());
  const float* qp = q.data_ptr<float>();
  const auto* kp = static_cast<const char*>(keys.data_ptr());
  const auto* vp = static_cast<const char*>(values.data_ptr());
  const int64_t key_stride = keys.stride(0) * keys.element_size(),
                value_stride = values.stride(0) * values.element_size();
  const int64_t key_row = stored_row_bytes(key_type, d), value_row = stored_row_bytes(value_type, d);
  const int64_t* pp = key_positions.data_ptr<int64_t>();
  float* op = out.data_ptr<float>();
  float* pp_out = nullptr;
  if (probabilities != nullptr) {
    *probabilities = at::empty({H, S}, queries.options());
    pp_out = probabilities->data_ptr<float>();
  }
  const ChunkKernel kernel = chunk_kernel(key_type, value_type, d);
  const int64_t chunks = (S + kChunkEntries - 1) / kChunkEntries, tasks = KV * chunks;
  // The partial results of every chunk, on the calling thread (the workers write disjoint parts).
  thread_local std::vector<float> partials;
  const size_t need = static_cast<size_t>(tasks * G * (d + 2));
  if (partials.size() < need) partials.resize(need);
  float* part_out = partials.data();
  float* part_max = part_out + tasks * G * d;
  float* part_sum = part_max + tasks * G;
  const auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t task = t0; task < t1; ++task) {
      const int64_t h = task / chunks, first = task % chunks * kChunkEntries;
      const ChunkView view{qp + h * G * d,
                           kp + h * key_stride + first * key_row,
                           vp + h * value_stride + first * value_row,
                           pp + h * key_positions.stride(0) + first,
                           std::min(kChunkEntries, S - first),
                           part_out + task * G * d,
                           part_max + task * G,
                           part_sum + task * G,
                           pp_out == nullptr ? nullptr : pp_out + h * G * S + first,
                           S};
      kernel(view, G, d, q_position, sliding_window);
    }
  };
  // Small caches stay on the calling thread (waking the others costs more than they would save).
  balanced_parallel_for(tasks, KV * G * S * d < 2 * kMinParallelWork ? tasks : 1, run);
  for (int64_t h = 0; h < KV; ++h) {
    for (int64_t g = 0; g < G; ++g) {
      merge_chunks(chunks, G, d, g, part_out + h * chunks * G * d, part_max + h * chunks * G, part_sum + h * chunks * G,
                   op + (h * G + g) * d, pp_out == nullptr ? nullptr : pp_out + (h * G + g) * S, S);
    }
  }
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
