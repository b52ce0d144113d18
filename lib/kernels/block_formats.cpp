#include "kernels/block_formats.h"

#include <cassert>

namespace kvc {
namespace {

constexpr BlockFormat kFormats[] = {
    {BlockType::F32, "F32", 1, 4},       {BlockType::F16, "F16", 1, 2},       {BlockType::BF16, "BF16", 1, 2},
    {BlockType::Q4_0, "Q4_0", 32, 18},   {BlockType::Q4_1, "Q4_1", 32, 20},   {BlockType::Q5_0, "Q5_0", 32, 22},
    {BlockType::Q5_1, "Q5_1", 32, 24},   {BlockType::Q8_0, "Q8_0", 32, 34},   {BlockType::Q4_K, "Q4_K", 256, 144},
    {BlockType::Q5_K, "Q5_K", 256, 176}, {BlockType::Q6_K, "Q6_K", 256, 210},
};

}  // namespace

const BlockFormat* block_format(uint32_t ggml_type) {
  for (const BlockFormat& f : kFormats) {
    if (static_cast<uint32_t>(f.type) == ggml_type) return &f;
  }
  return nullptr;
}

const BlockFormat& block_format(BlockType type) {
  const BlockFormat* f = block_format(static_cast<uint32_t>(type));
  assert(f != nullptr);
  return *f;
}

bool is_q32_format(BlockType type) {
  return type == BlockType::Q4_0 || type == BlockType::Q4_1 || type == BlockType::Q5_0 || type == BlockType::Q5_1 ||
         type == BlockType::Q8_0;
}

bool is_k_format(BlockType type) {
  return type == BlockType::Q4_K || type == BlockType::Q5_K || type == BlockType::Q6_K;
}

}  // namespace kvc
