#pragma once
// Activations quantized to int8 for the block kernels' integer dot products: each block of `block`
// values (32 for the Q4_0..Q8_0 weights, 256 for the K formats) gets a float scale d = max|x| / 127 and
// q = round(x / d), so that a weight block's integer dot product with q, times both scales, is its
// product with x up to the activation's rounding (at most d / 2 per value). Quantized once per input row
// and read by every row of the matrix.
#include <cstdint>
#include <vector>

namespace kvc {

// One quantized input row, as the kernels read it.
struct Q8Row {
  const int8_t* q = nullptr;       // cols values
  const float* d = nullptr;        // one scale per block
  const int32_t* sum = nullptr;    // per block: the sum of its q
  const float* dsum = nullptr;     // per block: d times that sum (the product of a constant weight row)
  const int16_t* sum16 = nullptr;  // sums of q over each 16 values
  const int16_t* sum32 = nullptr;  // 256-value blocks only: over each 32 values
  // 32-value blocks quantized while the level is AVX-512 only (null otherwise), for the Q8_0 kernel that
  // takes two blocks per 512-bit register: per pair of blocks p, 16 lanes, the first 8 for block 2p and
  // the last 8 for block 2p + 1, holding its d and minus its sum in the first lane of the 8 (so that
  // lanes summed give the block's figure). Empty for the last block of an odd count.
  const float* pair_d = nullptr;
  const int32_t* pair_negsum = nullptr;
};

// `rows` input rows of `cols` values (a multiple of `block`), quantized; storage reused between calls.
class Q8Rows {
 public:
  // block: 32 or 256.
  void quantize(const float* x, int64_t rows, int64_t cols, int64_t block);
  Q8Row row(int64_t r) const;
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t block() const { return block_; }

 private:
  int64_t rows_ = 0, cols_ = 0, block_ = 0;
  bool pairs_ = false;  // the pair_* lanes were filled
  std::vector<int8_t> q_;
  std::vector<float> d_, dsum_;
  std::vector<int32_t> sum_;
  std::vector<int16_t> sum16_, sum32_;
  std::vector<float> pair_d_;
  std::vector<int32_t> pair_negsum_;
};

}  // namespace kvc
