#include "kernels/parallel_linear.h"

#include <ATen/Parallel.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>

#include "kernels/half_precision.h"
#include "runtime/blas_threads.h"
#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"

namespace kvc {
namespace {

// 16-bit weights. The weight is read once, in 16 bits, and widened block by block into fp32 buffers
// that stay in cache; the GEMMs run at fp32 speed on the widened blocks.
// Blocks shared by all threads are wide (6 MB in fp32): the GEMM's efficiency falls with a narrow
// right-hand side. A thread's own blocks are narrower, so that few input rows still split evenly.
constexpr int64_t kSharedBlockElements = int64_t{3} << 19;
constexpr int64_t kOwnBlockRows = 512;

struct HalfWeight {
  const uint16_t* data;
  at::ScalarType type;
  int64_t rows, cols;
  void widen(int64_t first, int64_t count, float* out) const {
    half_to_float(type, data + first * cols, out, count * cols);
  }
};

}  // namespace

// Many input rows: every thread multiplies its share of the rows by each block, and widens its share
// of the next block into the other buffer meanwhile, so that the block is widened once for all threads.
void widened_linear_split_rows(const at::Tensor& x, int64_t rows, int64_t cols, const WidenRows& widen, at::Tensor& y,
                               int64_t threads) {
  const int64_t block = std::max<int64_t>(64, kSharedBlockElements / cols / 64 * 64);
  const int64_t T = x.size(0), blocks = (rows + block - 1) / block;
  const int64_t row_share = (T + threads - 1) / threads, widen_share = (block + threads - 1) / threads;
  at::Tensor buffers[2] = {at::empty({block, cols}, x.options()), at::empty({block, cols}, x.options())};
  const auto block_rows = [&](int64_t b) { return std::min(block, rows - b * block); };
  const auto widen_part = [&](int64_t b, int64_t part) {
    const int64_t begin = part * widen_share, n = std::min(widen_share, block_rows(b) - begin);
    if (n > 0) widen(b * block + begin, n, buffers[b % 2].data_ptr<float>() + begin * cols);
  };
  at::parallel_for(0, threads, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) widen_part(0, i);
  });
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t n_rows = block_rows(b);
    at::parallel_for(0, threads, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const int64_t begin = i * row_share, n = std::min(row_share, T - begin);
        if (n > 0) {
          at::Tensor y_part = y.narrow(0, begin, n).narrow(1, b * block, n_rows);
          at::mm_out(y_part, x.narrow(0, begin, n), buffers[b % 2].narrow(0, 0, n_rows).t());
        }
        if (b + 1 < blocks) widen_part(b + 1, i);
      }
    });
  }
}

namespace {

// Few input rows: each thread owns whole blocks of output columns and widens them itself.
void half_linear_split_columns(const at::Tensor& x, const HalfWeight& w, at::Tensor& y, int64_t threads) {
  const int64_t blocks = (w.rows + kOwnBlockRows - 1) / kOwnBlockRows;
  at::parallel_for(0, blocks, threads == 1 ? blocks : 1, [&](int64_t b0, int64_t b1) {
    at::Tensor widened = at::empty({kOwnBlockRows, w.cols}, x.options());
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t first = b * kOwnBlockRows, rows = std::min(kOwnBlockRows, w.rows - first);
      w.widen(first, rows, widened.data_ptr<float>());
      at::Tensor y_block = y.narrow(1, first, rows);
      at::mm_out(y_block, x, widened.narrow(0, 0, rows).t());
    }
  });
}

}  // namespace

at::Tensor parallel_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const bool half = is_half_type(weight.scalar_type());
  if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || (weight.scalar_type() != at::kFloat && !half) ||
      x.dim() != 2 || weight.dim() != 2 || x.size(1) != weight.size(1) || !weight.is_contiguous()) {
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
  if (half) {
    const HalfWeight w{static_cast<const uint16_t*>(weight.data_ptr()), weight.scalar_type(), out, x.size(1)};
    if (split_rows) {
      widened_linear_split_rows(
          xc, out, x.size(1), [&](int64_t first, int64_t n, float* dst) { w.widen(first, n, dst); }, y, threads);
    } else {
      half_linear_split_columns(xc, w, y, threads);
    }
    if (bias.defined()) y.add_(bias);
    return y;
  }
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
