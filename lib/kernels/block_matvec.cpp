#include "kernels/block_matvec.h"

#include <algorithm>
#include <array>
#include <atomic>

#include "kernels/block_dot.h"
#include "kernels/half_precision.h"
#include "kernels/matvec.h"
#include "runtime/balanced_parallel_for.h"
#include "util/error.h"

namespace kvc {
namespace {

// Integer unless kvc-bench --block-kernels measured the registers' dequantization faster (see
// docs/gguf-block-weights.md): indexed by ggml type id.
std::array<std::atomic<int>, 32> forms{};

// The input in every form a matrix's segments read: fp32, and int8 in 32- and 256-value blocks.
struct Inputs {
  const float* x = nullptr;
  Q8Rows q32, q256;
  Q8Row row32, row256;
};

void segment_rows(const BlockSegment& s, int64_t cols, const Inputs& in, BlockIsa isa, float* y, int64_t lo,
                  int64_t hi) {
  const uint8_t* w = s.data + lo * s.row_bytes;
  const int64_t n = hi - lo;
  constexpr int64_t kStack = 256;
  float reordered[kStack];
  // Rows that go elsewhere are computed into a buffer first, at most kStack at a time.
  if (!s.output_rows.empty() && n > kStack) {
    for (int64_t r = lo; r < hi; r += kStack) segment_rows(s, cols, in, isa, y, r, std::min(hi, r + kStack));
    return;
  }
  float* out = s.output_rows.empty() ? y + s.first_row + lo : reordered;
  switch (s.type) {
    case BlockType::F32: fp32_matvec_rows(reinterpret_cast<const float*>(w), in.x, out, 0, n, cols); break;
    case BlockType::F16:
    case BlockType::BF16:
      half_matvec_rows(s.type == BlockType::F16 ? at::kHalf : at::kBFloat16, w, in.x, out, 0, n, cols);
      break;
    default:
      if (isa == BlockIsa::Avx512Vnni && block_kernel_form(s.type) == BlockKernelForm::Float) {
        avx512_float_block_kernel(s.type)(w, s.row_bytes, cols, in.x, out, 0, n);
      } else {
        block_kernel(isa, s.type)(w, s.row_bytes, cols, activation_block(s.type) == 32 ? in.row32 : in.row256, out, 0,
                                  n);
      }
  }
  if (!s.output_rows.empty()) {
    for (int64_t r = 0; r < n; ++r) y[s.first_row + s.output_rows[static_cast<size_t>(lo + r)]] = reordered[r];
  }
}

}  // namespace

BlockKernelForm block_kernel_form(BlockType type) {
  return static_cast<BlockKernelForm>(forms[static_cast<size_t>(type)].load(std::memory_order_relaxed));
}

void set_block_kernel_form(BlockType type, BlockKernelForm form) {
  forms[static_cast<size_t>(type)].store(static_cast<int>(form));
}

namespace {

// Y [B, rows] = X [B, cols] W^T, each input quantized as block_matvec quantizes it and multiplied by the
// same row kernels, chunk by chunk.
at::Tensor block_matvec_inputs(const BlockMatrix& w, const at::Tensor& x2, const at::Tensor& bias,
                               const std::function<void()>& alongside) {
  const BlockIsa isa = block_isa();
  const at::Tensor xc = x2.contiguous();
  const int64_t inputs = xc.size(0), cols = w.cols();
  bool want32 = false, want256 = false;
  for (const BlockSegment& s : w.segments()) {
    const bool integer = isa != BlockIsa::Avx512Vnni || block_kernel_form(s.type) == BlockKernelForm::Integer;
    want32 |= integer && activation_block(s.type) == 32;
    want256 |= integer && activation_block(s.type) == 256;
  }
  // One scratch per calling thread: the workers only read it, and it lives until the call returns.
  thread_local std::vector<Inputs> scratch;
  if (scratch.size() < static_cast<size_t>(inputs)) scratch.resize(static_cast<size_t>(inputs));
  std::vector<Inputs>& in = scratch;  // captured by reference below: the workers read the calling thread's
  for (int64_t b = 0; b < inputs; ++b) {
    Inputs& ib = in[static_cast<size_t>(b)];
    ib.x = xc.data_ptr<float>() + b * cols;
    if (want32) {
      ib.q32.quantize(ib.x, 1, cols, 32);
      ib.row32 = ib.q32.row(0);
    }
    if (want256) {
      ib.q256.quantize(ib.x, 1, cols, 256);
      ib.row256 = ib.q256.row(0);
    }
  }
  at::Tensor y = at::empty({inputs, w.rows()}, x2.options());
  float* yp = y.data_ptr<float>();
  // Split only when each thread gets at least kMinThreadBytes, in chunks of kChunkBytes. Blocks hold 4-8
  // times the values of fp32 per byte, so the split pays at a quarter of fast_matvec's ~256 KB. The split
  // does not depend on the number of inputs.
  constexpr int64_t kMinThreadBytes = int64_t{64} << 10, kChunkBytes = int64_t{32} << 10;
  const int64_t rows = w.rows();
  const int64_t row_bytes = std::max<int64_t>(1, w.bytes() / std::max<int64_t>(1, rows));
  const int64_t min_rows_per_thread = std::max<int64_t>(16, kMinThreadBytes / row_bytes);
  const int64_t chunk = rows < 2 * min_rows_per_thread ? rows : std::max<int64_t>(8, kChunkBytes / row_bytes);
  const std::vector<BlockSegment>& segments = w.segments();
  balanced_parallel_for(
      rows, chunk,
      [&](int64_t r0, int64_t r1) {
        for (int64_t b = 0; b < inputs; ++b) {
          for (const BlockSegment& s : segments) {
            const int64_t lo = std::max(r0, s.first_row), hi = std::min(r1, s.first_row + s.rows);
            if (lo < hi) {
              segment_rows(s, cols, in[static_cast<size_t>(b)], isa, yp + b * rows, lo - s.first_row, hi - s.first_row);
            }
          }
        }
      },
      alongside);
  if (bias.defined()) y.add_(bias);
  return y;
}

}  // namespace

at::Tensor block_matvec(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias,
                        const std::function<void()>& alongside) {
  KVC_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 1 && x.size(0) == w.cols(),
            "block_matvec: the input must be a vector of {} fp32 values on the CPU", w.cols());
  return block_matvec_inputs(w, x.unsqueeze(0), bias, alongside)[0];
}

at::Tensor block_matvec_each(const BlockMatrix& w, const at::Tensor& x, const at::Tensor& bias,
                             const std::function<void()>& alongside) {
  KVC_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 2 && x.size(1) == w.cols(),
            "block_matvec_each: the inputs must be rows of {} fp32 values on the CPU", w.cols());
  return block_matvec_inputs(w, x, bias, alongside);
}

}  // namespace kvc
