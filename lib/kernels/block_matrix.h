#pragma once
// A weight matrix kept in ggml's block formats (block_formats.h), as a GGUF file stores it: runs of
// rows ("segments"), each in one format, stacked. A Q4_K_M file stores a layer's projections in
// different formats (attn_v in Q6_K, attn_q in Q4_K, ...); stacking q, k and v into one matrix keeps
// each in its own. The bytes are not owned: `owner` keeps them alive (the file's mapping).
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/block_formats.h"

namespace kvc {

struct BlockSegment {
  BlockType type;
  const uint8_t* data;  // rows * row_bytes bytes
  int64_t first_row;    // within the matrix
  int64_t rows;
  int64_t row_bytes;
  // Empty, or where each stored row goes in the output (output row first_row + map[r] for stored row r
  // of the segment, a permutation of 0..rows-1): llama.cpp's converter reorders the q/k rows of Llama
  // heads, and the products put them back in Hugging Face's order.
  std::vector<int32_t> output_rows;
  std::vector<int32_t> stored_rows;  // its inverse: the stored row of each output row (empty with it)
};

class BlockMatrix {
 public:
  BlockMatrix(int64_t cols, std::shared_ptr<const void> owner) : cols_(cols), owner_(std::move(owner)) {}
  // Appends `rows` rows of `type` at `data`; `cols` must be a whole number of the format's blocks (the
  // loader checks this first, naming the tensor).
  void append(BlockType type, const uint8_t* data, int64_t rows, std::vector<int32_t> output_rows = {});

  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t bytes() const;  // what one product reads
  const std::vector<BlockSegment>& segments() const { return segments_; }
  // The segment holding output row `row`, and the stored row's bytes.
  const BlockSegment& segment_of(int64_t row) const;
  const uint8_t* stored_row(int64_t row) const;

 private:
  int64_t cols_;
  int64_t rows_ = 0;
  std::vector<BlockSegment> segments_;
  std::shared_ptr<const void> owner_;
};

}  // namespace kvc
