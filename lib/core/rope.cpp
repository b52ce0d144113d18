#include "core/rope.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>

#include "runtime/gradient_recording.h"
#include "runtime/parallel_grain.h"
#include "util/error.h"

namespace kvc {

at::Tensor rope_inverse_frequencies(const ModelConfig& config) {
  const auto opts = at::TensorOptions().dtype(at::kDouble);
  const int64_t d = config.head_dim;
  at::Tensor inv_freq = 1.0 / at::pow(config.rope_theta, at::arange(0, d, 2, opts) / static_cast<double>(d));
  const RopeScaling& s = config.rope_scaling;
  if (!s.frequency_divisors.empty()) {
    KVC_CHECK(static_cast<int64_t>(s.frequency_divisors.size()) == d / 2,
              "RoPE frequency divisors: {} given for a head_dim of {} (expected {})", s.frequency_divisors.size(), d,
              d / 2);
    return inv_freq / at::tensor(s.frequency_divisors, opts);
  }
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

// CPU tables start at this many positions (or the model's context, if shorter) and double as forward()
// reserves more: a short run of a long-context model does not hold tables for its whole context.
constexpr int64_t kInitialCpuPositions = 8192;

Rope::Rope(const ModelConfig& config, at::Device device)
    : inv_freq_(rope_inverse_frequencies(config)), device_(device), head_dim_(config.head_dim) {
  ensure_table(device.is_cpu() ? std::min<int64_t>(config.max_position_embeddings, kInitialCpuPositions)
                               : config.max_position_embeddings);
}

void Rope::ensure_table(int64_t max_position) const {
  const std::lock_guard<std::mutex> lock(table_mutex_);
  if (max_position < table_len_) return;
  const int64_t len = std::max<int64_t>(max_position + 1, table_len_ * 2);
  if (!device_.is_cpu()) {
    const at::Tensor angles = at::outer(at::arange(len, at::TensorOptions().dtype(at::kDouble)), inv_freq_);
    const at::Tensor full = at::cat({angles, angles}, /*dim=*/1);  // HF duplicates the half
    cos_ = full.cos().to(device_);                                 // float64; cast to the activations' dtype on use
    sin_ = full.sin().to(device_);
  } else {
    // In slices of positions, so that no float64 temporary of the whole table is ever held.
    at::Tensor cos = at::empty({len, head_dim_ / 2}), sin = at::empty({len, head_dim_ / 2});
    constexpr int64_t kSlice = 1024;
    for (int64_t first = 0; first < len; first += kSlice) {
      const int64_t n = std::min(kSlice, len - first);
      const at::Tensor angles =
          at::outer(at::arange(first, first + n, at::TensorOptions().dtype(at::kDouble)), inv_freq_);
      cos.narrow(0, first, n).copy_(angles.cos());
      sin.narrow(0, first, n).copy_(angles.sin());
    }
    cos_f32_ = cos;
    sin_f32_ = sin;
  }
  table_len_ = len;
}

at::Tensor Rope::rotate(const at::Tensor& x, const at::Tensor& positions, bool inverse) const {
  if (x.size(-2) == 0) return x;
  const bool positions_fit =
      positions.dim() == 1
          ? positions.size(0) == x.size(-2)
          : positions.dim() == 2 && x.dim() == 3 && positions.size(0) == x.size(0) && positions.size(1) == x.size(1);
  if (x.device().is_cpu() && device_.is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 3 && x.stride(2) == 1 &&
      x.size(2) == head_dim_ && positions.device().is_cpu() && positions.scalar_type() == at::kLong && positions_fit &&
      !records_gradient({x})) {
    return rotate_cpu_float(x, positions, inverse);
  }
  std::vector<int64_t> shape = positions.sizes().vec();  // [T] or [heads, T], broadcast against x
  shape.push_back(head_dim_);
  at::Tensor cos, sin;
  if (device_.is_cpu()) {
    // The table's float64 values, computed for these positions only.
    const at::Tensor angles = at::outer(positions.reshape(-1).to(at::kDouble), inv_freq_);
    const at::Tensor full = at::cat({angles, angles}, /*dim=*/1);
    cos = full.cos().view(shape);
    sin = full.sin().view(shape);
  } else {
    const at::Tensor flat = positions.to(device_).reshape(-1);
    cos = cos_.index_select(0, flat).view(shape);
    sin = sin_.index_select(0, flat).view(shape);
  }
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

at::Tensor Rope::rotate_cpu_float(const at::Tensor& x, const at::Tensor& positions, bool inverse) const {
  const at::Tensor pos = positions.contiguous();
  const int64_t* p = pos.data_ptr<int64_t>();
  const auto [min_p, max_p] = std::minmax_element(p, p + pos.numel());
  KVC_CHECK(*min_p >= 0, "RoPE: negative position {}", *min_p);
  ensure_table(*max_p);
  at::Tensor cos_table, sin_table;
  {
    const std::lock_guard<std::mutex> lock(table_mutex_);
    cos_table = cos_f32_;
    sin_table = sin_f32_;
  }
  const int64_t A = x.size(0), T = x.size(1), d = head_dim_, half = d / 2;
  at::Tensor out = at::empty({A, T, d}, x.options());
  const float* xp = x.data_ptr<float>();
  const float* cos = cos_table.data_ptr<float>();
  const float* sin = sin_table.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float sign = inverse ? -1.0f : 1.0f;
  const bool per_head = pos.dim() == 2;
  // Same operations as x * cos + rotate_half(x) * sin with float32 tables, so results are identical.
  at::parallel_for(0, A, parallel_grain(T * d), [&](int64_t a0, int64_t a1) {
    for (int64_t a = a0; a < a1; ++a) {
      for (int64_t t = 0; t < T; ++t) {
        const int64_t row = per_head ? p[a * T + t] : p[t];
        const float* c = cos + row * half;
        const float* s = sin + row * half;
        const float* xr = xp + a * x.stride(0) + t * x.stride(1);
        float* o = op + (a * T + t) * d;
        for (int64_t i = 0; i < half; ++i) o[i] = xr[i] * c[i] + (-xr[i + half]) * (sign * s[i]);
        for (int64_t i = half; i < d; ++i) o[i] = xr[i] * c[i - half] + xr[i - half] * (sign * s[i - half]);
      }
    }
  });
  return out;
}

at::Tensor Rope::apply(const at::Tensor& x, const at::Tensor& positions) const { return rotate(x, positions, false); }
at::Tensor Rope::unapply(const at::Tensor& x, const at::Tensor& positions) const { return rotate(x, positions, true); }

}  // namespace kvc
