#pragma once
// Moving several tensors between a GPU and the host with as few waits as possible: the retrieval cache
// lives on the host while the model may run on a GPU.
#include <ATen/ATen.h>

#include <vector>

namespace kvc::retrieval {

// The tensors on the host, bit for bit, in one copy: their bytes packed end to end (each part at an
// offset that is a multiple of 8, so every type stays aligned), copied, then viewed back as they were.
// Works on any device; callers skip it for tensors already on the host.
std::vector<at::Tensor> copy_to_host_together(const std::vector<at::Tensor>& parts);

// A host buffer for data bound to `device`: pinned for a GPU, so the copy up can be queued without
// waiting (PyTorch's pinned-memory allocator keeps it until that copy has run).
at::Tensor host_staging_buffer(at::IntArrayRef sizes, at::ScalarType type, const at::Device& device);

// `host` on `device` without waiting for the copy when `host` is pinned.
at::Tensor queue_copy_to(const at::Tensor& host, const at::Device& device);

}  // namespace kvc::retrieval
