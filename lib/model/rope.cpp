#include "model/rope.h"

#include <cmath>

namespace kvc {

at::Tensor rope_inverse_frequencies(const ModelConfig& config) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const int64_t d = config.head_dim;
  at::Tensor inv_freq = 1.0 / at::pow(config.rope_theta, at::arange(0, d, 2, opts) / static_cast<double>(d));
  const RopeScaling& s = config.rope_scaling;
  if (s.type == "linear") return inv_freq / s.factor;
  if (s.type != "llama3") return inv_freq;
  // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between blended.
  const double old_len = static_cast<double>(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor;
  const double high_freq_wavelen = old_len / s.high_freq_factor;
  const at::Tensor wavelen = 2.0 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / s.factor, inv_freq);
  const at::Tensor smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  const at::Tensor smoothed = (1.0 - smooth) * scaled / s.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

Rope::Rope(const ModelConfig& config, at::Device device)
    : inv_freq_(rope_inverse_frequencies(config)), device_(device), head_dim_(config.head_dim) {
  ensure_table(config.max_position_embeddings);
}

void Rope::ensure_table(int64_t max_position) const {
  if (max_position < table_len_) return;
  const int64_t len = std::max<int64_t>(max_position + 1, table_len_ * 2);
  const at::Tensor pos = at::arange(len, at::TensorOptions().dtype(at::kDouble));
  const at::Tensor angles = at::outer(pos, inv_freq_);           // [len, d/2] float64
  const at::Tensor full = at::cat({angles, angles}, /*dim=*/1);  // HF duplicates the half
  cos_ = full.cos().to(device_);  // float64; cast to the activations' dtype on use
  sin_ = full.sin().to(device_);
  table_len_ = len;
}

at::Tensor Rope::rotate(const at::Tensor& x, const at::Tensor& positions, bool inverse) const {
  if (x.size(-2) == 0) return x;
  ensure_table(positions.max().item<int64_t>());
  const at::Tensor flat = positions.to(device_).reshape(-1);
  std::vector<int64_t> shape = positions.sizes().vec();  // [T] or [heads, T], broadcast against x
  shape.push_back(head_dim_);
  at::Tensor cos = cos_.index_select(0, flat).view(shape);
  at::Tensor sin = sin_.index_select(0, flat).view(shape);
  if (x.scalar_type() != cos.scalar_type()) {
    cos = cos.to(x.scalar_type());
    sin = sin.to(x.scalar_type());
  }
  if (inverse) sin = -sin;
  const int64_t half = head_dim_ / 2;
  const at::Tensor x1 = x.narrow(-1, 0, half);
  const at::Tensor x2 = x.narrow(-1, half, half);
  const at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& positions) const { return rotate(x, positions, false); }
at::Tensor Rope::unapply(const at::Tensor& x, const at::Tensor& positions) const { return rotate(x, positions, true); }

}  // namespace kvc
