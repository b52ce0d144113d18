#include "model/tensor_bridge.h"

#include "util/error.h"

namespace kvc {

at::ScalarType scalar_type_of(st::DType dtype) {
  switch (dtype) {
    case st::DType::F64: return at::kDouble;
    case st::DType::F32: return at::kFloat;
    case st::DType::F16: return at::kHalf;
    case st::DType::BF16: return at::kBFloat16;
    case st::DType::I64: return at::kLong;
    case st::DType::I32: return at::kInt;
    case st::DType::I16: return at::kShort;
    case st::DType::I8: return at::kChar;
    case st::DType::U8: return at::kByte;
    case st::DType::BOOL: return at::kBool;
  }
  fail("unknown safetensors dtype");
}

st::DType dtype_of(at::ScalarType type) {
  switch (type) {
    case at::kDouble: return st::DType::F64;
    case at::kFloat: return st::DType::F32;
    case at::kHalf: return st::DType::F16;
    case at::kBFloat16: return st::DType::BF16;
    case at::kLong: return st::DType::I64;
    case at::kInt: return st::DType::I32;
    case at::kShort: return st::DType::I16;
    case at::kChar: return st::DType::I8;
    case at::kByte: return st::DType::U8;
    case at::kBool: return st::DType::BOOL;
    default: fail("tensor type {} cannot be stored in safetensors", c10::toString(type));
  }
}

static at::Tensor view_of(const std::shared_ptr<st::SafetensorsFile>& file, const st::TensorInfo& info) {
  const at::ScalarType type = scalar_type_of(info.dtype);
  void* data = const_cast<uint8_t*>(file->data(info.name));
  const bool aligned = reinterpret_cast<uintptr_t>(data) % st::dtype_size(info.dtype) == 0;
  // The deleter owns a reference to the mapping, so the view can outlive the file object.
  at::Tensor view = at::from_blob(
      data, info.shape, [keep = file](void*) {}, at::TensorOptions().dtype(type));
  return aligned ? view : view.clone();
}

at::Tensor load_tensor(const std::shared_ptr<st::SafetensorsFile>& file, const std::string& name) {
  return view_of(file, file->info(name));
}

at::Tensor load_tensor(const st::Checkpoint& checkpoint, const std::string& name, at::ScalarType dtype,
                       at::Device device) {
  KVC_CHECK(checkpoint.contains(name), "checkpoint lacks tensor '{}'", name);
  at::Tensor t = view_of(checkpoint.file_of(name), checkpoint.info(name));
  if (t.scalar_type() != dtype) t = t.to(dtype);
  if (t.device() != device) t = t.to(device);
  return t;
}

void add_tensor(st::SafetensorsWriter& writer, const std::string& name, const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
  writer.add(name, dtype_of(cpu.scalar_type()), cpu.sizes().vec(), cpu.data_ptr(),
             static_cast<size_t>(cpu.numel()) * cpu.element_size());
}

}  // namespace kvc
