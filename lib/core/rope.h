#pragma once
// Rotary position embedding exactly as Hugging Face applies it (rotate_half convention). Angles are
// computed in float64 and rounded once, so positions near the context limit stay accurate.
#include <ATen/ATen.h>

#include <mutex>

#include "core/model_config.h"

namespace kvc {

class Rope {
 public:
  Rope(const ModelConfig& config, at::Device device);

  // x: [heads, T, head_dim]; positions: [T] int64 (or [heads, T]). Returns the rotated tensor.
  at::Tensor apply(const at::Tensor& x, const at::Tensor& positions) const;
  // Inverse rotation (rotate by -angle): recovers pre-RoPE keys from stored rotated ones.
  at::Tensor unapply(const at::Tensor& x, const at::Tensor& positions) const;
  const at::Tensor& inv_freq() const { return inv_freq_; }
  // Extends the tables to cover `max_position`. Positions on a GPU are not read back to check this
  // (that would wait for the GPU every call): whoever makes them reserves first, as forward() does.
  void reserve(int64_t max_position) const { ensure_table(max_position); }

 private:
  at::Tensor rotate(const at::Tensor& x, const at::Tensor& positions, bool inverse) const;
  // fp32 on CPU in one pass (the decode hot path: a dozen tensor ops per call otherwise).
  at::Tensor rotate_cpu_float(const at::Tensor& x, const at::Tensor& positions, bool inverse) const;
  void ensure_table(int64_t max_position) const;
  at::Tensor inv_freq_;  // float64 [head_dim/2], after rope_scaling
  at::Device device_;
  int64_t head_dim_;
  // On a GPU: [table_len, head_dim] float64 on the device. On the CPU the other rotations compute their
  // angles from the positions in the same float64 operations instead (a table for Gemma 3's 32K
  // positions of 256 dimensions would hold 128 MiB).
  mutable at::Tensor cos_, sin_;
  // CPU: [table_len, head_dim / 2] rounded once to float32 (both halves of a head take the same angles).
  mutable at::Tensor cos_f32_, sin_f32_;
  mutable int64_t table_len_ = 0;
  // Guards the tables' growth: a rotation takes its own handle on them first, so that a growth on
  // another thread never frees what it reads.
  mutable std::mutex table_mutex_;
};

// inv_freq per Hugging Face's rope-init functions (default, linear, llama3), in float64.
at::Tensor rope_inverse_frequencies(const ModelConfig& config);

}  // namespace kvc
