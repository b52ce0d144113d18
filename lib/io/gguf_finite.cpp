#include "io/gguf_finite.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "util/error.h"

namespace kvc::gguf {
namespace {

// Byte offsets of the f16 scales in one block of each quantized type (ggml-common.h's block_* layouts).
std::vector<uint32_t> scale_offsets(uint32_t type) {
  switch (type) {
    case 2: return {0};        // Q4_0: d, qs
    case 3: return {0, 2};     // Q4_1: d, m, qs
    case 6: return {0};        // Q5_0: d, qh, qs
    case 7: return {0, 2};     // Q5_1: d, m, qh, qs
    case 8: return {0};        // Q8_0: d, qs
    case 10: return {80, 82};  // Q2_K: scales[16], qs[64], d, dmin
    case 11: return {108};     // Q3_K: hmask[32], qs[64], scales[12], d
    case 12: return {0, 2};    // Q4_K: d, dmin, scales[12], qs
    case 13: return {0, 2};    // Q5_K: d, dmin, scales[12], qh, qs
    case 14: return {208};     // Q6_K: ql[128], qh[64], scales[16], d
    default: return {};
  }
}

bool f16_finite(const uint8_t* p) {
  uint16_t bits;
  std::memcpy(&bits, p, 2);
  return (bits & 0x7c00U) != 0x7c00U;
}

template <typename Word>
std::optional<uint64_t> first_non_finite(const uint8_t* bytes, uint64_t count, Word exponent_mask) {
  for (uint64_t i = 0; i < count; ++i) {
    Word w;
    std::memcpy(&w, bytes + i * sizeof(Word), sizeof(Word));
    if ((w & exponent_mask) == exponent_mask) return i;
  }
  return std::nullopt;
}

}  // namespace

void check_tensor_finite(const GgufFile& file, const TensorInfo& t) {
  if (t.data == nullptr) return;
  std::optional<uint64_t> bad;
  const char* what = "element";
  switch (t.type) {
    case 0: bad = first_non_finite<uint32_t>(t.data, t.nbytes / 4, 0x7f800000U); break;  // F32
    case 1: bad = first_non_finite<uint16_t>(t.data, t.nbytes / 2, 0x7c00U); break;      // F16
    case 30: bad = first_non_finite<uint16_t>(t.data, t.nbytes / 2, 0x7f80U); break;     // BF16
    default: {
      const GgmlTypeInfo* info = ggml_type_info(t.type);
      const std::vector<uint32_t> offsets = scale_offsets(t.type);
      if (info == nullptr || offsets.empty()) return;  // types without f16 scales, or refused by the loader
      what = "block";
      const uint64_t blocks = t.nbytes / info->block_bytes;
      for (uint64_t b = 0; b < blocks && !bad; ++b) {
        for (uint32_t offset : offsets) {
          if (!f16_finite(t.data + b * info->block_bytes + offset)) {
            bad = b;
            break;
          }
        }
      }
    }
  }
  KVC_CHECK(!bad, "'{}': tensor '{}' holds a non-finite value (NaN or infinity) in {} {}; the file is damaged",
            file.path(), t.name, what, *bad);
}

void check_all_finite(const GgufFile& file) {
  for (const TensorInfo& t : file.tensors()) check_tensor_finite(file, t);
}

}  // namespace kvc::gguf
