#include "retrieval/host_transfer.h"

namespace kvc::retrieval {

std::vector<at::Tensor> copy_to_host_together(const std::vector<at::Tensor>& parts) {
  std::vector<at::Tensor> bytes;
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (const at::Tensor& t : parts) {
    at::Tensor b = t.contiguous().view({-1}).view(at::kByte);
    const int64_t padded = (b.numel() + 7) / 8 * 8;
    if (padded > b.numel()) b = at::cat({b, at::zeros({padded - b.numel()}, b.options())});
    offsets.push_back(total);
    bytes.push_back(b);
    total += padded;
  }
  const at::Tensor host = at::cat(bytes).to(at::kCPU);
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    const at::Tensor& t = parts[i];
    out.push_back(host.narrow(0, offsets[i], t.numel() * static_cast<int64_t>(t.element_size()))
                      .view(t.scalar_type())
                      .view(t.sizes()));
  }
  return out;
}

at::Tensor host_staging_buffer(at::IntArrayRef sizes, at::ScalarType type, const at::Device& device) {
  return at::empty(sizes, at::TensorOptions().dtype(type).pinned_memory(device.is_cuda()));
}

at::Tensor queue_copy_to(const at::Tensor& host, const at::Device& device) {
  return host.to(device, host.scalar_type(), /*non_blocking=*/host.is_pinned());
}

}  // namespace kvc::retrieval
