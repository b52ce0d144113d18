#pragma once
// The ggml block formats the block kernels read as stored, by their ggml type ids. A row of a weight
// matrix is a whole number of blocks; each block holds `values` values in `bytes` bytes:
//   Q4_0  18 B / 32: half d, 16 B of 4-bit q (value j < 16 low nibble of byte j, j >= 16 high nibble of
//         byte j - 16); value = d (q - 8)
//   Q4_1  20 B / 32: half d, half m, 4-bit q as Q4_0; value = d q + m
//   Q5_0  22 B / 32: half d, u32 qh (bit j: the fifth bit of value j), 4-bit q as Q4_0; d (q - 16)
//   Q5_1  24 B / 32: half d, half m, u32 qh, 4-bit q; d q + m
//   Q8_0  34 B / 32: half d, 32 int8 q; d q
//   Q4_K 144 B / 256: half d, half dmin, 12 B of eight 6-bit (scale, min) pairs, 128 B of 4-bit q in four
//         groups of 64 values (low nibbles of 32 bytes, then their high nibbles); d sc q - dmin m per 32
//   Q5_K 176 B / 256: as Q4_K with 32 B qh (bit 2g + s of byte l: the fifth bit of value l of sub-block
//         2g + s) before the 128 B of low bits
//   Q6_K 210 B / 256: 128 B low 4 bits, 64 B high 2 bits, 16 int8 scales (one per 16 values), half d;
//         d sc (q - 32)
//   F32, F16, BF16: one value per block.
#include <cstdint>

namespace kvc {

enum class BlockType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

struct BlockFormat {
  BlockType type;
  const char* name;
  int64_t values;  // per block
  int64_t bytes;   // per block
};

// The format of ggml type id `ggml_type`, or nullptr when no block kernel reads it.
const BlockFormat* block_format(uint32_t ggml_type);
const BlockFormat& block_format(BlockType type);
// Bytes of a row of `cols` values (a whole number of blocks).
inline int64_t block_row_bytes(const BlockFormat& f, int64_t cols) { return cols / f.values * f.bytes; }
// The 32-value formats, whose products take activations quantized in 32-value blocks; the K formats
// take 256-value blocks; F32, F16 and BF16 take the fp32 activations themselves.
bool is_q32_format(BlockType type);
bool is_k_format(BlockType type);

}  // namespace kvc
