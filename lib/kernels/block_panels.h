#pragma once
// The prefill's form of the block products (block_linear.h), on AVX-512 VNNI. A few weight rows at a time
// are unpacked once into unsigned 8-bit codes with a float scale and bias per group of values
// (value = scale * code + bias, groups of 32, or 16 for Q6_K), which every format reduces to; the
// quantized input is laid out 16 tokens at a time, four consecutive values of each token side by side
// (one 64-byte row per four values). Each step then broadcasts four codes of a weight row and
// multiplies them with the same four values of 16 tokens (vpdpbusd): a 16-token column of int32 sums
// per row and group, scaled once per group. Internal to block_linear.cpp.
#include <cstdint>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/quantized_activation.h"

namespace kvc {

inline constexpr int64_t kPanelTokens = 16;

// Rows of one format unpacked: codes [rows][cols], scale and bias [rows][cols / group].
struct UnpackedRows {
  int64_t rows = 0, cols = 0, group = 32;
  std::vector<uint8_t> codes;
  std::vector<float> scale, bias;
};
// Unpacks `rows` rows of `type` starting at `w` (rows of row_bytes). AVX-512 VNNI only.
void unpack_rows(BlockType type, const uint8_t* w, int64_t row_bytes, int64_t cols, int64_t rows, UnpackedRows& out);

// kPanelTokens tokens of the quantized input (32-value blocks), padded with zeros past the last token.
struct TokenPanel {
  std::vector<int8_t> q;         // [cols / 4][16 tokens][4]
  std::vector<float> d, dsum32;  // [cols / 32][16]: each token's block scale, and scale times block sum
  std::vector<float> dsum16;     // [cols / 16][16]: the block scale times the sum of each 16 values
};
// Tokens [first, first + count) of `x` (count <= kPanelTokens) into `panel`.
void pack_tokens(const Q8Rows& x, int64_t first, int64_t count, TokenPanel& panel);

// y[t * y_stride + out_col(r)] = row r of `w` (rows [r0, r1)) times token t of the panel, for t < tokens;
// out_col(r) = column0 + (out_rows ? out_rows[r] : r). AVX-512 VNNI only.
void panel_products(const UnpackedRows& w, int64_t r0, int64_t r1, const TokenPanel& panel, int64_t tokens, float* y,
                    int64_t y_stride, int64_t column0, const int32_t* out_rows);

}  // namespace kvc
