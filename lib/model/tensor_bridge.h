#pragma once
// safetensors bytes -> at::Tensor. F32 on CPU is zero-copy over the memory map (the tensor keeps the
// mapping alive); other dtypes are converted once at load.
#include <ATen/ATen.h>

#include <string>

#include "io/safetensors.h"

namespace kvc {

at::ScalarType scalar_type_of(st::DType dtype);
st::DType dtype_of(at::ScalarType type);  // throws kvc::Error for types safetensors cannot hold

// The named tensor from a checkpoint, converted to `dtype` on `device`.
at::Tensor load_tensor(const st::Checkpoint& checkpoint, const std::string& name, at::ScalarType dtype,
                       at::Device device);
// Same from a single file.
at::Tensor load_tensor(const std::shared_ptr<st::SafetensorsFile>& file, const std::string& name);

// Adds a (CPU-copied, contiguous) tensor to a writer under `name`.
void add_tensor(st::SafetensorsWriter& writer, const std::string& name, const at::Tensor& tensor);

}  // namespace kvc
