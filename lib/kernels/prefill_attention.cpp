#include "kernels/prefill_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/simd_avx2.h"
#include "runtime/blas_threads.h"

namespace kvc {
namespace {

// Score-block size per thread (floats): 2 MB stays in the last-level cache beside K and V.
constexpr int64_t kScoreBlockElements = int64_t{1} << 19;

#if defined(__x86_64__)
// row[lo, hi) <- softmax(scale * row[lo, hi)), everything else 0 (all 0 if the range is empty).
KVC_AVX2 void softmax_range(float* row, int64_t n, int64_t lo, int64_t hi, float scale) {
  for (int64_t s = 0; s < lo; ++s) row[s] = 0.0f;
  for (int64_t s = hi; s < n; ++s) row[s] = 0.0f;
  if (lo >= hi) return;
  __m256 m = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  int64_t s = lo;
  for (; s + 8 <= hi; s += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(row + s));
  float max = simd::horizontal_max(m);
  for (; s < hi; ++s) max = std::max(max, row[s]);
  // exp(scale * (x - max)): the maximum of scale * x is scale * max since scale > 0.
  const __m256 scale_v = _mm256_set1_ps(scale), offset = _mm256_set1_ps(-scale * max);
  __m256 sum_v = _mm256_setzero_ps();
  for (s = lo; s + 8 <= hi; s += 8) {
    const __m256 e = simd::exp(_mm256_fmadd_ps(_mm256_loadu_ps(row + s), scale_v, offset));
    _mm256_storeu_ps(row + s, e);
    sum_v = _mm256_add_ps(sum_v, e);
  }
  float sum = simd::horizontal_sum(sum_v);
  for (; s < hi; ++s) {
    row[s] = std::exp(scale * row[s] - scale * max);
    sum += row[s];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (s = lo; s + 8 <= hi; s += 8) _mm256_storeu_ps(row + s, _mm256_mul_ps(_mm256_loadu_ps(row + s), inv));
  for (; s < hi; ++s) row[s] *= 1.0f / sum;
}

// Unsorted positions (a compressed cache): invisible entries become -inf, then a full-row softmax.
KVC_AVX2 void softmax_masked(float* row, const int64_t* positions, int64_t n, int64_t q_pos, int64_t window,
                             float scale) {
  int64_t first = n, last = 0;
  for (int64_t s = 0; s < n; ++s) {
    const bool visible = positions[s] <= q_pos && (window <= 0 || positions[s] > q_pos - window);
    if (!visible) {
      row[s] = -std::numeric_limits<float>::infinity();
    } else {
      first = std::min(first, s);
      last = s + 1;
    }
  }
  softmax_range(row, n, first, last, scale);  // -inf entries inside the range become exp(-inf) = 0
}

struct BlockPlan {
  const at::Tensor& queries;  // [H, T, d]
  const int64_t* q_pos;
  const at::Tensor& keys;  // [KV, S, d]
  const at::Tensor& values;
  const at::Tensor& key_positions;
  int64_t group, window;
  float scale;
  at::Tensor& out;  // [H, T, d]
};

int64_t query_block_size(int64_t T, int64_t S, int64_t G) {
  return std::max<int64_t>(1, std::min<int64_t>(T, kScoreBlockElements / std::max<int64_t>(1, G * S)));
}

// Queries t0 .. t0 + tb - 1 of the G query heads reading KV head h.
KVC_AVX2 void attend_block(const BlockPlan& p, int64_t h, int64_t t0, int64_t tb) {
  const int64_t S = p.keys.size(1), d = p.keys.size(2), G = p.group, rows = G * tb;
  const int64_t* k_pos = p.key_positions[h].data_ptr<int64_t>();
  const bool sorted = std::is_sorted(k_pos, k_pos + S);
  int64_t q_max = p.q_pos[t0];
  for (int64_t t = t0; t < t0 + tb; ++t) q_max = std::max(q_max, p.q_pos[t]);
  const int64_t visible = sorted ? std::upper_bound(k_pos, k_pos + S, q_max) - k_pos : S;
  const at::Tensor q_block = p.queries.narrow(0, h * G, G).narrow(1, t0, tb).reshape({rows, d});
  at::Tensor scores = at::mm(q_block, p.keys[h].narrow(0, 0, visible).t());  // [rows, visible]
  float* sp = scores.data_ptr<float>();
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t q = p.q_pos[t0 + r % tb];
    float* row = sp + r * visible;
    if (sorted) {
      const int64_t hi = std::upper_bound(k_pos, k_pos + visible, q) - k_pos;
      const int64_t lo = p.window > 0 ? std::upper_bound(k_pos, k_pos + hi, q - p.window) - k_pos : 0;
      softmax_range(row, visible, lo, hi, p.scale);
    } else {
      softmax_masked(row, k_pos, visible, q, p.window, p.scale);
    }
  }
  const at::Tensor out_block = at::mm(scores, p.values[h].narrow(0, 0, visible));
  p.out.narrow(0, h * G, G).narrow(1, t0, tb).copy_(out_block.view({G, tb, d}));
}
#endif

}  // namespace

at::Tensor fast_prefill_attention(const at::Tensor& queries, const at::Tensor& q_positions, const at::Tensor& keys,
                                  const at::Tensor& values, const at::Tensor& key_positions, int64_t sliding_window) {
#if defined(__x86_64__)
  const auto is_cpu_float = [](const at::Tensor& t) { return t.device().is_cpu() && t.scalar_type() == at::kFloat; };
  if (!cpu_has_avx2_fma() || !is_cpu_float(queries) || !is_cpu_float(keys) || !is_cpu_float(values) ||
      queries.dim() != 3 || keys.dim() != 3 || values.sizes() != keys.sizes() || keys.size(1) == 0 ||
      key_positions.scalar_type() != at::kLong || !key_positions.device().is_cpu() ||
      q_positions.scalar_type() != at::kLong || !q_positions.device().is_cpu()) {
    return {};
  }
  const int64_t H = queries.size(0), T = queries.size(1), KV = keys.size(0), d = keys.size(2);
  if (KV == 0 || H % KV != 0 || queries.size(2) != d || keys.stride(2) != 1 || values.stride(2) != 1) return {};
  const at::Tensor q_pos = q_positions.contiguous();
  const at::Tensor k_pos = key_positions.contiguous();
  at::Tensor out = at::empty({H, T, d}, queries.options());
  const BlockPlan plan{queries, q_pos.data_ptr<int64_t>(), keys, values, k_pos, H / KV, sliding_window,
                      static_cast<float>(1.0 / std::sqrt(static_cast<double>(d))), out};
  // (KV head, query block) pairs run in parallel, each product single-threaded: BLAS threads inside
  // these small products only add synchronisation.
  const int threads = at::get_num_threads();
  set_blas_threads(1);
  const int64_t block = query_block_size(T, keys.size(1), H / KV);
  const int64_t blocks = (T + block - 1) / block;
  at::parallel_for(0, KV * blocks, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t t0 = (i % blocks) * block;
      attend_block(plan, i / blocks, t0, std::min(block, T - t0));
    }
  });
  set_blas_threads(threads);
  return out;
#else
  return {};
#endif
}

}  // namespace kvc
