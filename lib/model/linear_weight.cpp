#include "model/linear_weight.h"

#include "io/gguf_dequant.h"
#include "kernels/block_linear.h"
#include "kernels/block_matvec.h"
#include "kernels/matvec.h"
#include "kernels/parallel_linear.h"
#include "runtime/gradient_recording.h"

namespace kvc {

LinearWeight::LinearWeight(std::shared_ptr<const BlockMatrix> blocks)
    : blocks_(std::move(blocks)), dequantized_(std::make_shared<Dequantized>()) {}

int64_t LinearWeight::rows() const { return blocks_ ? blocks_->rows() : dense_.size(0); }
int64_t LinearWeight::cols() const { return blocks_ ? blocks_->cols() : dense_.size(1); }

int64_t LinearWeight::bytes() const {
  return blocks_ ? blocks_->bytes() : dense_.numel() * static_cast<int64_t>(dense_.element_size());
}

std::vector<at::Tensor> LinearWeight::streamed() const {
  if (!blocks_) return {dense_};
  std::vector<at::Tensor> out;
  for (const BlockSegment& s : blocks_->segments()) {
    out.push_back(
        at::from_blob(const_cast<uint8_t*>(s.data), {s.rows * s.row_bytes}, at::TensorOptions().dtype(at::kByte)));
  }
  return out;
}

namespace {

void dequantize_row(const BlockMatrix& m, int64_t row, float* out) {
  const BlockSegment& s = m.segment_of(row);
  gguf::dequantize(static_cast<uint32_t>(s.type), m.stored_row(row), static_cast<uint64_t>(m.cols()), out);
}

}  // namespace

const at::Tensor& LinearWeight::dequantized() const {
  std::call_once(dequantized_->once, [&] {
    at::Tensor t = at::empty({blocks_->rows(), blocks_->cols()});
    for (int64_t r = 0; r < blocks_->rows(); ++r)
      dequantize_row(*blocks_, r, t.data_ptr<float>() + r * blocks_->cols());
    dequantized_->tensor = t;
  });
  return dequantized_->tensor;
}

at::Tensor LinearWeight::lookup_rows(const at::Tensor& ids) const {
  if (!blocks_) return dense_.index_select(0, ids);
  const at::Tensor cpu_ids = ids.to(at::kCPU, at::kLong).contiguous();
  const int64_t n = cpu_ids.numel();
  at::Tensor out = at::empty({n, blocks_->cols()});
  const int64_t* id = cpu_ids.data_ptr<int64_t>();
  for (int64_t i = 0; i < n; ++i) dequantize_row(*blocks_, id[i], out.data_ptr<float>() + i * blocks_->cols());
  return out;
}

// One-row inputs (decoding) use matrix-vector products: sgemm repacks the whole weight matrix on every
// call, which costs several times more than streaming it once. Multi-row inputs (prefill) split
// single-threaded GEMMs over LibTorch's threads, or multiply the blocks directly.
// 16-bit weights under fp32 activations go through LibTorch only where the kernels do not apply
// (recording gradients, no AVX2): widened per call, slow but exact.
at::Tensor LinearWeight::apply(const at::Tensor& x, const at::Tensor& bias,
                               const std::function<void()>& alongside) const {
  if (blocks_) {
    if (!x.device().is_cpu() || x.scalar_type() != at::kFloat || records_gradient({x, bias})) {
      if (alongside) alongside();
      return at::linear(x, dequantized().to(x.device(), x.scalar_type()), bias);
    }
    if (x.size(0) == 1) return block_matvec(*blocks_, x[0], bias, alongside).unsqueeze(0);
    if (alongside) alongside();
    return block_linear(*blocks_, x, bias);
  }
  if (x.size(0) == 1) {
    if (const at::Tensor y = fast_matvec(dense_, x[0], bias, alongside); y.defined()) return y.unsqueeze(0);
  }
  if (alongside) alongside();
  if (x.size(0) != 1) {
    if (const at::Tensor y = parallel_linear(x, dense_, bias); y.defined()) return y;
  }
  return at::linear(x, dense_.scalar_type() == x.scalar_type() ? dense_ : dense_.to(x.scalar_type()), bias);
}

at::Tensor LinearWeight::apply_each(const at::Tensor& x, const at::Tensor& bias,
                                    const std::function<void()>& alongside) const {
  if (x.size(0) == 1) return apply(x, bias, alongside);
  const bool cpu_fp32 = x.device().is_cpu() && x.scalar_type() == at::kFloat && !records_gradient({x, bias});
  if (blocks_ && cpu_fp32) return block_matvec_each(*blocks_, x, bias, alongside);
  if (!blocks_) {
    if (const at::Tensor y = fast_matvec_each(dense_, x, bias, alongside); y.defined()) return y;
  }
  // Elsewhere each row's product as apply computes it.
  if (alongside) alongside();
  std::vector<at::Tensor> rows;
  for (int64_t b = 0; b < x.size(0); ++b) rows.push_back(apply(x.narrow(0, b, 1), bias));
  return at::cat(rows);
}

}  // namespace kvc
