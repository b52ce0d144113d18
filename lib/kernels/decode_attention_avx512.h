#pragma once
// The two passes of decode attention over one chunk of a KV head's rows, with AVX-512 (32 registers of
// 16 lanes): a row of 64 values is four registers, so a group of up to four query heads is scored
// against two to eight rows at once and weighs a row's values in one pass over the chunk, where the AVX2
// passes of decode_attention.cpp take half the width and, for three or four heads, four passes over the
// values. For rows stored as fp32, bf16 or f16 with a head_dim that is a multiple of 16. Internal to
// decode_attention.cpp; call only when block_isa() is Avx512Vnni.
#include <cstdint>

namespace kvc::attention_avx512 {

enum class RowType { Fp32, Bf16, F16 };

// scores[g * stride + s] = scale * q_g . k_s for g < gn (1..4), s < n; q: gn rows of d floats.
void score_rows(RowType type, int64_t gn, const float* q, const void* keys, int64_t n, int64_t d, float scale,
                float* scores, int64_t stride);

// out[g * d + c] = sum_s p[g * stride + s] v_s[c] for g < gn (1..4).
void weigh_rows(RowType type, int64_t gn, const float* p, int64_t stride, const void* values, int64_t n, int64_t d,
                float* out);

}  // namespace kvc::attention_avx512
