#include "kernels/block_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>

#include "kernels/block_dot.h"
#include "kernels/block_isa.h"
#include "kernels/block_matvec.h"
#include "kernels/block_panels.h"
#include "kernels/parallel_linear.h"
#include "runtime/balanced_parallel_for.h"
#include "runtime/blas_threads.h"
#include "util/error.h"

namespace kvc {
namespace {

// Rows unpacked per chunk: 32 rows of 2048 codes stay in L2 while every token panel passes them.
constexpr int64_t kRowChunk = 32;
// Fewer tokens than this go through the matrix-vector kernels: the panels' work is that of 16 tokens.
constexpr int64_t kMinPanelTokens = 4;

// 16/32-bit segments: LibTorch's product on the segment's rows, into y's columns.
void dense_segment(const BlockSegment& s, int64_t cols, const at::Tensor& x, at::Tensor& y) {
  const at::ScalarType type = s.type == BlockType::F32   ? at::kFloat
                              : s.type == BlockType::F16 ? at::kHalf
                                                         : at::kBFloat16;
  const at::Tensor w =
      at::from_blob(const_cast<uint8_t*>(s.data), {s.rows, cols}, at::TensorOptions().dtype(type)).to(at::kFloat);
  const at::Tensor part = at::mm(x, w.t());
  if (s.output_rows.empty()) {
    y.narrow(1, s.first_row, s.rows).copy_(part);
  } else {
    const at::Tensor index = at::tensor(std::vector<int64_t>(s.output_rows.begin(), s.output_rows.end())) + s.first_row;
    y.index_copy_(1, index, part);
  }
}

at::Tensor token_by_token(const BlockMatrix& w, const at::Tensor& x) {
  const int64_t T = x.size(0);
  at::Tensor y = at::empty({T, w.rows()}, x.options());
  for (int64_t t = 0; t < T; ++t) y[t].copy_(block_matvec(w, x[t]));
  return y;
}

// Levels without the panel products: panels of rows dequantized to fp32 and multiplied by single-threaded
// GEMMs on LibTorch's threads, as the fp32 path (parallel_linear.h) multiplies them.
constexpr int64_t kPanelRows = 64;

at::Tensor dequantized_panels(const BlockMatrix& w, const at::Tensor& x) {
  const int64_t T = x.size(0), cols = w.cols();
  at::Tensor y = at::empty({T, w.rows()}, x.options());
  set_blas_threads(1);
  const int64_t panels = (w.rows() + kPanelRows - 1) / kPanelRows;
  at::parallel_for(0, panels, 1, [&](int64_t p0, int64_t p1) {
    at::Tensor panel = at::empty({kPanelRows, cols}, x.options()), part = at::empty({T, kPanelRows}, x.options());
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t first = p * kPanelRows, rows = std::min(kPanelRows, w.rows() - first);
      // Output rows first.. of the panel, each dequantized from its stored row.
      for (int64_t r = 0; r < rows; ++r) {
        const BlockSegment& s = w.segment_of(first + r);
        dequantize_block_rows(s.type, w.stored_row(first + r), s.row_bytes, cols, 1,
                              panel.data_ptr<float>() + r * cols);
      }
      at::Tensor out = part.narrow(1, 0, rows);
      at::mm_out(out, x, panel.narrow(0, 0, rows).t());
      y.narrow(1, first, rows).copy_(out);
    }
  });
  return y;
}

// Many tokens (at least this many per thread): blocks of rows dequantized once into buffers that all
// threads share, each thread multiplying its share of the tokens (parallel_linear.h), instead of a
// panel of 64 rows per GEMM, each of which repacks every token.
constexpr int64_t kSharedBlockTokens = 64;

at::Tensor shared_blocks(const BlockMatrix& w, const at::Tensor& x, int64_t threads) {
  at::Tensor y = at::empty({x.size(0), w.rows()}, x.options());
  set_blas_threads(1);
  const int64_t cols = w.cols();
  widened_linear_split_rows(
      x, w.rows(), cols,
      [&](int64_t first, int64_t count, float* out) {
        for (int64_t r = first; r < first + count; ++r) {
          const BlockSegment& s = w.segment_of(r);
          dequantize_block_rows(s.type, w.stored_row(r), s.row_bytes, cols, 1, out + (r - first) * cols);
        }
      },
      y, threads);
  return y;
}

}  // namespace

at::Tensor block_linear(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias) {
  KVC_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.size(1) == w.cols(),
            "block_linear: the input must be [tokens, {}] fp32 values on the CPU", w.cols());
  const int64_t T = x.size(0), cols = w.cols();
  if (block_isa() != BlockIsa::Avx512Vnni || T < kMinPanelTokens) {
    const int64_t threads = at::get_num_threads();
    at::Tensor y = T < kMinPanelTokens                 ? token_by_token(w, x)
                   : T >= kSharedBlockTokens * threads ? shared_blocks(w, x.contiguous(), threads)
                                                       : dequantized_panels(w, x.contiguous());
    if (bias.defined()) y.add_(bias);
    return y;
  }
  const at::Tensor xc = x.contiguous();
  at::Tensor y = at::empty({T, w.rows()}, x.options());
  bool quantized = false;
  for (const BlockSegment& s : w.segments()) {
    if (block_format(s.type).values == 1) {
      dense_segment(s, cols, xc, y);
    } else {
      quantized = true;
    }
  }
  if (quantized) {
    Q8Rows q;
    q.quantize(xc.data_ptr<float>(), T, cols, 32);
    const int64_t tiles = (T + kPanelTokens - 1) / kPanelTokens;
    std::vector<TokenPanel> panels(static_cast<size_t>(tiles));
    at::parallel_for(0, tiles, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        pack_tokens(q, p * kPanelTokens, std::min(kPanelTokens, T - p * kPanelTokens), panels[static_cast<size_t>(p)]);
      }
    });
    float* yp = y.data_ptr<float>();
    const int64_t rows = w.rows();
    balanced_parallel_for(rows, kRowChunk, [&](int64_t r0, int64_t r1) {
      thread_local UnpackedRows unpacked;
      for (const BlockSegment& s : w.segments()) {
        const int64_t lo = std::max(r0, s.first_row), hi = std::min(r1, s.first_row + s.rows);
        if (lo >= hi || block_format(s.type).values == 1) continue;
        const int64_t local = lo - s.first_row;
        unpack_rows(s.type, s.data + local * s.row_bytes, s.row_bytes, cols, hi - lo, unpacked);
        const int32_t* order = s.output_rows.empty() ? nullptr : s.output_rows.data() + local;
        for (int64_t p = 0; p < tiles; ++p) {
          const int64_t t0 = p * kPanelTokens;
          panel_products(unpacked, 0, hi - lo, panels[static_cast<size_t>(p)], std::min(kPanelTokens, T - t0),
                         yp + t0 * rows, rows, order ? s.first_row : lo, order);
        }
      }
    });
  }
  if (bias.defined()) y.add_(bias);
  return y;
}

}  // namespace kvc
