#pragma once
// A projection's weight matrix as the forward pass multiplies by it: a dense tensor (fp32, bf16 or f16,
// as loaded) or a matrix of GGUF blocks read in place from the file's mapping (kernels/block_matrix.h).
#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <mutex>

#include "kernels/block_matrix.h"

namespace kvc {

class LinearWeight {
 public:
  LinearWeight() = default;
  LinearWeight(at::Tensor dense) : dense_(std::move(dense)) {}  // NOLINT: a tensor is a weight
  explicit LinearWeight(std::shared_ptr<const BlockMatrix> blocks);

  bool defined() const { return dense_.defined() || blocks_ != nullptr; }
  bool is_blocks() const { return blocks_ != nullptr; }
  const at::Tensor& dense() const { return dense_; }  // undefined for blocks
  const BlockMatrix& blocks() const { return *blocks_; }
  bool same_as(const LinearWeight& o) const {
    return blocks_ ? blocks_ == o.blocks_ : !o.blocks_ && dense_.defined() && dense_.is_same(o.dense_);
  }
  int64_t rows() const;
  int64_t cols() const;
  int64_t numel() const { return rows() * cols(); }
  int64_t bytes() const;  // what one product reads
  // The bytes a product streams, as uint8 tensors over them (dense: the tensor itself): what a
  // measurement of the read bandwidth should read.
  std::vector<at::Tensor> streamed() const;

  // y [T, rows] = x [T, cols] W^T (+ bias). `alongside` (work independent of this product) runs once:
  // on the calling thread while the other threads start streaming the weights when decoding on the
  // CPU, else first.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& bias = {}, const std::function<void()>& alongside = {}) const;
  // y [B, rows] for x [B, cols] holding B sequences' single tokens: row b is what apply(x[b:b+1], bias)
  // returns, bit for bit, with the weights streamed once for all B rows on the CPU (decoding in lockstep).
  // `alongside` runs once, as in apply.
  at::Tensor apply_each(const at::Tensor& x, const at::Tensor& bias = {},
                        const std::function<void()>& alongside = {}) const;
  // Rows `ids` [ids, cols] (an embedding lookup): dense rows as stored, block rows dequantized to fp32
  // (only those rows).
  at::Tensor lookup_rows(const at::Tensor& ids) const;

 private:
  // Blocks under autograd (gate training): the matrix dequantized once to fp32 on first use, so that
  // LibTorch's differentiable product runs.
  const at::Tensor& dequantized() const;

  at::Tensor dense_;
  std::shared_ptr<const BlockMatrix> blocks_;
  struct Dequantized {
    std::once_flag once;
    at::Tensor tensor;
  };
  std::shared_ptr<Dequantized> dequantized_;
};

}  // namespace kvc
