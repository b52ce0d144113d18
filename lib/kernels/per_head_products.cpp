#include "kernels/per_head_products.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cpu_features.h"
#include "kernels/vector_ops.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

bool loops_apply(const at::Tensor& a, const at::Tensor& m) {
  return a.device().is_cpu() && m.device().is_cpu() && a.dim() == 3 && m.dim() == 3 && a.size(0) == m.size(0) &&
         a.scalar_type() == m.scalar_type() && (a.scalar_type() == at::kFloat || a.scalar_type() == at::kDouble) &&
         !a.requires_grad() && !m.requires_grad() && a.is_contiguous() && m.stride(2) == 1 && m.stride(1) == m.size(2);
}

template <typename T>
T dot(const T* a, const T* b, int64_t n, bool avx2) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (avx2) return dot_avx2(a, b, n);
  }
#endif
  return dot_plain(a, b, n);
}

template <typename T>
void axpy(T* y, const T* x, T a, int64_t n, bool avx2) {
#if defined(__x86_64__)
  if constexpr (std::is_same_v<T, float>) {
    if (avx2) return axpy_avx2(y, x, a, n);
  }
#endif
  axpy_plain(y, x, a, n);
}

// One work item per (head, row): k products of length n.
template <typename T>
void dot_rows(const at::Tensor& a, const at::Tensor& m, at::Tensor& out) {
  const int64_t R = a.size(1), n = a.size(2), k = m.size(1), head_stride = m.stride(0);
  const T* pa = a.data_ptr<T>();
  const T* pm = m.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const bool avx2 = cpu_has_avx2_fma();
  at::parallel_for(0, a.size(0) * R, parallel_grain(k * n), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const T* row = pa + item * n;
      const T* basis = pm + (item / R) * head_stride;
      T* o = po + item * k;
      for (int64_t j = 0; j < k; ++j) o[j] = dot(row, basis + j * n, n, avx2);
    }
  });
}

template <typename T>
void combine_rows(const at::Tensor& z, const at::Tensor& m, at::Tensor& out) {
  const int64_t R = z.size(1), k = z.size(2), n = m.size(2), head_stride = m.stride(0);
  const T* pz = z.data_ptr<T>();
  const T* pm = m.data_ptr<T>();
  T* po = out.data_ptr<T>();
  const bool avx2 = cpu_has_avx2_fma();
  at::parallel_for(0, z.size(0) * R, parallel_grain(k * n), [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const T* weights = pz + item * k;
      const T* basis = pm + (item / R) * head_stride;
      T* o = po + item * n;
      std::fill(o, o + n, T(0));
      for (int64_t j = 0; j < k; ++j) axpy(o, basis + j * n, weights[j], n, avx2);
    }
  });
}

}  // namespace

at::Tensor per_head_dot_rows(const at::Tensor& a, const at::Tensor& m) {
  if (!loops_apply(a, m) || a.size(2) != m.size(2)) return {};
  at::Tensor out = at::empty({a.size(0), a.size(1), m.size(1)}, a.options());
  if (a.scalar_type() == at::kFloat) {
    dot_rows<float>(a, m, out);
  } else {
    dot_rows<double>(a, m, out);
  }
  return out;
}

at::Tensor per_head_combine_rows(const at::Tensor& z, const at::Tensor& m) {
  if (!loops_apply(z, m) || z.size(2) != m.size(1)) return {};
  at::Tensor out = at::empty({z.size(0), z.size(1), m.size(2)}, z.options());
  if (z.scalar_type() == at::kFloat) {
    combine_rows<float>(z, m, out);
  } else {
    combine_rows<double>(z, m, out);
  }
  return out;
}

}  // namespace kvc
