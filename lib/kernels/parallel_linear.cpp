#include "kernels/parallel_linear.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "runtime/parallel_grain.h"
#include "runtime/blas_threads.h"
#include "runtime/gradient_recording.h"

namespace kvc {

at::Tensor parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || weight.scalar_type() != at::kFloat || x.dim() != 2 ||
      weight.dim() != 2 || x.size(1) != weight.size(1)) {
    return {};
  }
  // The split writes into preallocated outputs, which autograd refuses: while gradients are recorded
  // (gate training), the caller takes LibTorch's own differentiable product.
  if (records_gradient({x, weight, bias})) return {};
  const int64_t T = x.size(0), out = weight.size(0);
  // Small products (tiny models, a few prompt tokens) run on the calling thread.
  const int64_t threads = T * out * x.size(1) < kMinParallelWork * 32 ? 1 : at::get_num_threads();
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({T, out}, x.options());
  set_blas_threads(1);
  // Enough rows per thread: split the rows (each share is a contiguous block of y, written in place).
  // Few rows: split the output columns instead, so that no thread repacks the whole weight.
  const bool split_rows = T >= 64 * threads;
  const int64_t extent = split_rows ? T : out;
  const int64_t share = (extent + threads - 1) / threads;
  at::parallel_for(0, threads, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t begin = i * share, n = std::min(share, extent - begin);
      if (n <= 0) continue;
      if (split_rows) {
        at::Tensor y_rows = y.narrow(0, begin, n);
        at::mm_out(y_rows, xc.narrow(0, begin, n), weight.t());
      } else {
        y.narrow(1, begin, n).copy_(at::mm(xc, weight.narrow(0, begin, n).t()));
      }
    }
  });
  if (bias.defined()) y.add_(bias);
  return y;
}

}  // namespace kvc
