#include "cache/dense_layer_cache.h"

#include <cstring>

#include "cache/capacity_growth.h"
#include "cache/ragged_layer_cache.h"
#include "kernels/half_precision.h"
#include "runtime/gradient_recording.h"
#include "util/error.h"

namespace kvc {

DenseLayerCache::DenseLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                                 CacheTypes types)
    : shape_(shape), rope_(std::move(rope)), options_(options) {
  types_ = types.resolved(options.dtype().toScalarType());
  key_options_ = options.dtype(storage_dtype(types_.keys));
  value_options_ = options.dtype(storage_dtype(types_.values));
  reserve(0);
}

void DenseLayerCache::reserve(int64_t capacity) {
  if (capacity <= capacity_ && keys_.defined()) return;
  const int64_t kv = shape_.num_kv_heads, d = shape_.head_dim;
  at::Tensor keys = at::empty({kv, capacity, stored_row_width(types_.keys, d)}, key_options_);
  at::Tensor values = at::empty({kv, capacity, stored_row_width(types_.values, d)}, value_options_);
  at::Tensor positions = at::empty({kv, capacity}, options_.dtype(at::kLong));
  if (length_ > 0) {
    keys.narrow(1, 0, length_).copy_(this->keys());
    values.narrow(1, 0, length_).copy_(this->values());
    positions.narrow(1, 0, length_).copy_(this->positions());
  }
  keys_ = keys;
  values_ = values;
  positions_ = positions;
  capacity_ = capacity;
}

void DenseLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  const int64_t t = keys.size(1);
  if (length_ + t > capacity_) {
    // Geometric growth keeps appends amortised O(1); prefill reserves exactly what it needs.
    reserve(length_ == 0 ? t : grown_capacity(length_ + t, capacity_));
  }
  const at::Tensor rotated = rope_->apply(keys, positions);
  if (!write_rows(rotated, values, positions)) {
    keys_.narrow(1, length_, t).copy_(encode_rows(rotated, types_.keys));
    values_.narrow(1, length_, t).copy_(encode_rows(values, types_.values));
    positions_.narrow(1, length_, t)
        .copy_(positions.to(positions_.device()).unsqueeze(0).expand({shape_.num_kv_heads, t}));
  }
  length_ += t;
}

namespace {

// Rows of fp32 values [n, t, d] (each row contiguous) at a tensor's strides.
bool readable_rows(const at::Tensor& t) {
  return t.device().is_cpu() && t.scalar_type() == at::kFloat && t.dim() == 3 && t.stride(2) == 1;
}

void store_row(at::ScalarType type, const float* src, void* dst, int64_t d) {
  if (type == at::kFloat) {
    std::memcpy(dst, src, static_cast<size_t>(d) * sizeof(float));
  } else {
    float_to_half(type, src, dst, d);
  }
}

}  // namespace

// What append does by tensor operations, row by row into the buffers (a decode step appends one row
// per head to every layer: a dozen LibTorch calls per layer otherwise). fp32/f16/bf16 rows on the CPU.
bool DenseLayerCache::write_rows(const at::Tensor& rotated_keys, const at::Tensor& values,
                                 const at::Tensor& positions) {
  const auto plain = [](at::ScalarType type) { return type == at::kFloat || is_half_type(type); };
  if (!plain(types_.keys) || !plain(types_.values) || !readable_rows(rotated_keys) || !readable_rows(values) ||
      !keys_.device().is_cpu() || !keys_.is_contiguous() || !values_.is_contiguous() || !positions.device().is_cpu() ||
      positions.scalar_type() != at::kLong || positions.dim() != 1 || records_gradient({rotated_keys, values})) {
    return false;
  }
  const int64_t KV = shape_.num_kv_heads, d = shape_.head_dim, t = rotated_keys.size(1);
  const at::Tensor pos = positions.contiguous();
  const int64_t* p = pos.data_ptr<int64_t>();
  const float* k = rotated_keys.data_ptr<float>();
  const float* v = values.data_ptr<float>();
  auto* kb = static_cast<char*>(keys_.data_ptr());
  auto* vb = static_cast<char*>(values_.data_ptr());
  int64_t* pb = positions_.data_ptr<int64_t>();
  const int64_t key_row = d * static_cast<int64_t>(at::elementSize(types_.keys));
  const int64_t value_row = d * static_cast<int64_t>(at::elementSize(types_.values));
  for (int64_t h = 0; h < KV; ++h) {
    for (int64_t i = 0; i < t; ++i) {
      const int64_t slot = h * capacity_ + length_ + i;
      store_row(types_.keys, k + h * rotated_keys.stride(0) + i * rotated_keys.stride(1), kb + slot * key_row, d);
      store_row(types_.values, v + h * values.stride(0) + i * values.stride(1), vb + slot * value_row, d);
      pb[slot] = p[i];
    }
  }
  return true;
}

at::Tensor DenseLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                   const AttentionProbe& probe, AttentionStats* stats) {
  return grouped_attention(shape_, queries, q_positions, keys(), values(), positions(), probe, stats, types_);
}

std::unique_ptr<LayerCache> DenseLayerCache::clone() const {
  auto copy = std::make_unique<DenseLayerCache>(*this);
  copy->own_buffers();
  return copy;
}

void DenseLayerCache::own_buffers() {
  keys_ = keys_.clone();
  values_ = values_.clone();
  positions_ = positions_.clone();
}

at::Tensor DenseLayerCache::lengths() const {
  return at::full({shape_.num_kv_heads}, length_, at::TensorOptions().dtype(at::kLong));
}

CacheFootprint DenseLayerCache::footprint() const {
  const int64_t per_entry =
      stored_row_bytes(types_.keys, shape_.head_dim) + stored_row_bytes(types_.values, shape_.head_dim);
  CacheFootprint f;
  f.entries = length_ * shape_.num_kv_heads;
  f.payload_bytes = f.entries * per_entry;
  f.ram_bytes = f.payload_bytes;
  f.step_read_bytes = f.payload_bytes;
  f.resident_bytes = capacity_ * shape_.num_kv_heads * (per_entry + static_cast<int64_t>(sizeof(int64_t)));
  return f;
}

void DenseLayerCache::retain(const at::Tensor& indices) {
  KVC_CHECK(indices.dim() == 2 && indices.size(0) == shape_.num_kv_heads,
            "retain: expected indices of shape [{}, n], got {} dims", shape_.num_kv_heads, indices.dim());
  const at::Tensor idx = indices.to(keys_.device(), at::kLong);
  if (idx.numel() > 0) {
    KVC_CHECK(idx.min().item<int64_t>() >= 0 && idx.max().item<int64_t>() < length_,
              "retain: index out of range for a cache of {} entries", length_);
  }
  const auto rows = [&idx](const at::Tensor& t) {
    return t.gather(1, idx.unsqueeze(-1).expand({idx.size(0), idx.size(1), t.size(2)}));
  };
  assign(rows(keys()), rows(values()), positions().gather(1, idx));
}

void DenseLayerCache::evict_one(const at::Tensor& slots) {
  const int64_t KV = shape_.num_kv_heads, last = length_ - 1;
  KVC_CHECK(slots.dim() == 1 && slots.size(0) == KV && length_ > 0, "evict_one: expected {} slots", KV);
  if (!keys_.device().is_cpu()) {
    // On a GPU the slots stay there (reading them back would wait for the GPU every step): each head's
    // last entry is scattered into its slot, a copy onto itself where the slot is the last one.
    const at::Tensor to = slots.to(keys_.device(), at::kLong).view({KV, 1});
    keys_.scatter_(1, to.unsqueeze(-1).expand({KV, 1, keys_.size(2)}), keys_.narrow(1, last, 1).clone());
    values_.scatter_(1, to.unsqueeze(-1).expand({KV, 1, values_.size(2)}), values_.narrow(1, last, 1).clone());
    positions_.scatter_(1, to, positions_.narrow(1, last, 1).clone());
    length_ = last;
    return;
  }
  const at::Tensor s = slots.to(at::kCPU, at::kLong).contiguous();
  const int64_t* slot = s.data_ptr<int64_t>();
  for (int64_t h = 0; h < KV; ++h) {
    KVC_CHECK(slot[h] >= 0 && slot[h] <= last, "evict_one: slot {} out of range for {} entries", slot[h], length_);
  }
  if (keys_.is_contiguous() && values_.is_contiguous()) {
    move_last_into(slot);
    return;
  }
  for (int64_t h = 0; h < KV; ++h) {
    if (slot[h] == last) continue;
    keys_[h][slot[h]].copy_(keys_[h][last]);
    values_[h][slot[h]].copy_(values_[h][last]);
    positions_[h][slot[h]].copy_(positions_[h][last]);
  }
  length_ = last;
}

void DenseLayerCache::move_last_into(const int64_t* slot) {
  const int64_t d = shape_.head_dim, last = length_ - 1;
  const int64_t key_row = stored_row_bytes(types_.keys, d), value_row = stored_row_bytes(types_.values, d);
  auto* k = static_cast<char*>(keys_.data_ptr());
  auto* v = static_cast<char*>(values_.data_ptr());
  auto* p = positions_.data_ptr<int64_t>();
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    if (slot[h] == last) continue;
    const int64_t to = h * capacity_ + slot[h], from = h * capacity_ + last;
    std::memcpy(k + to * key_row, k + from * key_row, static_cast<size_t>(key_row));
    std::memcpy(v + to * value_row, v + from * value_row, static_cast<size_t>(value_row));
    p[to] = p[from];
  }
  length_ = last;
}

void DenseLayerCache::assign(const at::Tensor& rotated_keys, const at::Tensor& values, const at::Tensor& positions) {
  // Fresh exactly-sized buffers: the previous, larger ones are freed when their last view goes.
  keys_ = encode_rows(rotated_keys, types_.keys).to(key_options_).contiguous().clone();
  values_ = encode_rows(values, types_.values).to(value_options_).contiguous().clone();
  positions_ = positions.to(keys_.device(), at::kLong).contiguous().clone();
  length_ = capacity_ = keys_.size(1);
}

MergeableRows::Rows DenseLayerCache::merge_rows() {
  KVC_CHECK(can_merge(), "a {} / {} cache cannot rewrite entries in place (rows of blocks share one scale)",
            cache_type_name(types_.keys), cache_type_name(types_.values));
  return {keys(), values()};
}

std::unique_ptr<LayerCache> DenseLayerCache::retain_per_head(const std::vector<at::Tensor>& per_head) {
  KVC_CHECK(static_cast<int64_t>(per_head.size()) == shape_.num_kv_heads, "retain: expected {} heads",
            shape_.num_kv_heads);
  // Only what is kept is copied into the per-head layout.
  std::vector<at::Tensor> k, v, p;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    const at::Tensor i = per_head[static_cast<size_t>(h)].to(keys_.device());
    k.push_back(keys()[h].index_select(0, i));
    v.push_back(values()[h].index_select(0, i));
    p.push_back(positions()[h].index_select(0, i));
  }
  auto ragged = std::make_unique<RaggedLayerCache>(shape_, rope_, options_, types_);
  ragged->assign(k, v, p);
  return ragged;
}

}  // namespace kvc
