#pragma once
// Whether a GGUF tensor decodes to finite numbers: every value of a float tensor, and every f16 scale
// (and minimum) of a quantized tensor's blocks, since a block's values are its integers times those.
// The safetensors path refuses NaN and infinity in weights; this gives the GGUF path the same rule.
#include "io/gguf_reader.h"

namespace kvc::gguf {

// Throws kvc::Error naming the file, the tensor and the first bad block or element.
void check_tensor_finite(const GgufFile& file, const TensorInfo& tensor);
// Every tensor of the file.
void check_all_finite(const GgufFile& file);

}  // namespace kvc::gguf
