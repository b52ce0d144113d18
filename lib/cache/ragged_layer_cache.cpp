#include "cache/ragged_layer_cache.h"

#include <algorithm>
#include <cstring>

#include "cache/capacity_growth.h"
#include "util/error.h"

namespace kvc {

RaggedLayerCache::RaggedLayerCache(AttentionShape shape, std::shared_ptr<const Rope> rope, at::TensorOptions options,
                                   CacheTypes types)
    : shape_(shape), rope_(std::move(rope)), options_(options) {
  types_ = types.resolved(options.dtype().toScalarType());
  key_options_ = options.dtype(storage_dtype(types_.keys));
  value_options_ = options.dtype(storage_dtype(types_.values));
  std::vector<at::Tensor> k, v, p;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    k.push_back(at::empty({0, stored_row_width(types_.keys, shape_.head_dim)}, key_options_));
    v.push_back(at::empty({0, stored_row_width(types_.values, shape_.head_dim)}, value_options_));
    p.push_back(at::empty({0}, options_.dtype(at::kLong)));
  }
  assign(k, v, p);
}

void RaggedLayerCache::assign(const std::vector<at::Tensor>& rotated_keys, const std::vector<at::Tensor>& values,
                              const std::vector<at::Tensor>& positions) {
  const auto n = static_cast<size_t>(shape_.num_kv_heads);
  KVC_CHECK(rotated_keys.size() == n && values.size() == n && positions.size() == n, "ragged cache: expected {} heads",
            n);
  start_.assign(n, 0);
  length_.assign(n, 0);
  for (size_t h = 0; h < n; ++h) {
    length_[h] = rotated_keys[h].size(0);
    if (h + 1 < n) start_[h + 1] = start_[h] + length_[h];
  }
  capacity_ = length_;
  // at::cat allocates exactly-sized buffers; the previous ones are released with their last view.
  const auto stored = [](const std::vector<at::Tensor>& rows, at::ScalarType type) {
    std::vector<at::Tensor> out;
    for (const at::Tensor& r : rows) out.push_back(encode_rows(r, type));
    return out;
  };
  keys_ = at::cat(stored(rotated_keys, types_.keys), 0).to(key_options_).contiguous();
  values_ = at::cat(stored(values, types_.values), 0).to(value_options_).contiguous();
  positions_ = at::cat(positions, 0).to(keys_.device(), at::kLong).contiguous();
}

void RaggedLayerCache::regrow(const std::vector<int64_t>& capacity) {
  int64_t total = 0;
  for (int64_t c : capacity) total += c;
  at::Tensor keys = at::empty({total, keys_.size(1)}, keys_.options());
  at::Tensor values = at::empty({total, values_.size(1)}, values_.options());
  at::Tensor positions = at::empty({total}, positions_.options());
  std::vector<int64_t> start(capacity.size(), 0);
  for (size_t h = 0; h < capacity.size(); ++h) {
    if (h > 0) start[h] = start[h - 1] + capacity[h - 1];
    const auto head = static_cast<int64_t>(h);
    keys.narrow(0, start[h], length(head)).copy_(head_keys(head));
    values.narrow(0, start[h], length(head)).copy_(head_values(head));
    positions.narrow(0, start[h], length(head)).copy_(head_positions(head));
  }
  keys_ = keys;
  values_ = values;
  positions_ = positions;
  start_ = start;
  capacity_ = capacity;
}

void RaggedLayerCache::append(const at::Tensor& keys, const at::Tensor& values, const at::Tensor& positions) {
  const int64_t t = keys.size(1);
  bool full = false;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) full = full || length(h) + t > capacity_[static_cast<size_t>(h)];
  if (full) {
    // Geometric growth, as the dense cache grows: each row is copied O(1) times over a generation.
    std::vector<int64_t> capacity = capacity_;
    for (size_t h = 0; h < capacity.size(); ++h) {
      capacity[h] = grown_capacity(length_[h] + t, capacity[h]);
    }
    regrow(capacity);
  }
  const at::Tensor rotated = encode_rows(rope_->apply(keys, positions), types_.keys).to(key_options_);
  const at::Tensor stored_values = encode_rows(values, types_.values).to(value_options_);
  const at::Tensor pos = positions.to(keys_.device(), at::kLong);
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    const int64_t end = start(h) + length(h);
    keys_.narrow(0, end, t).copy_(rotated[h]);
    values_.narrow(0, end, t).copy_(stored_values[h]);
    positions_.narrow(0, end, t).copy_(pos);
    length_[static_cast<size_t>(h)] += t;
  }
}

at::Tensor RaggedLayerCache::attend(const at::Tensor& queries, const at::Tensor& q_positions,
                                    const AttentionProbe& probe, AttentionStats* stats) {
  const int64_t KV = shape_.num_kv_heads, G = shape_.group_size(), T = queries.size(1);
  AttentionShape one = shape_;
  one.num_heads = G;
  one.num_kv_heads = 1;
  const bool want = stats != nullptr && probe.any();
  int64_t max_len = 0;
  for (int64_t h = 0; h < KV; ++h) max_len = std::max(max_len, length(h));
  const int64_t window = want ? std::min(probe.window, T) : 0;
  const at::TensorOptions stats_options = queries.options().dtype(at::kFloat);
  if (want && probe.column_sums) stats->column_sums = at::zeros({shape_.num_heads, max_len}, stats_options);
  if (want && window > 0) stats->window_probs = at::zeros({shape_.num_heads, window, max_len}, stats_options);
  std::vector<at::Tensor> outs;
  for (int64_t h = 0; h < KV; ++h) {
    AttentionStats s;
    outs.push_back(grouped_attention(one, queries.narrow(0, h * G, G), q_positions, head_keys(h).unsqueeze(0),
                                     head_values(h).unsqueeze(0), head_positions(h).unsqueeze(0), probe,
                                     want ? &s : nullptr, types_));
    if (want && probe.column_sums) stats->column_sums.narrow(0, h * G, G).narrow(1, 0, length(h)).copy_(s.column_sums);
    if (want && window > 0) {
      stats->window_probs.narrow(0, h * G, G).narrow(2, 0, length(h)).copy_(s.window_probs);
    }
  }
  return at::cat(outs, 0);
}

void RaggedLayerCache::retain(const at::Tensor& indices) {
  KVC_CHECK(indices.dim() == 2 && indices.size(0) == shape_.num_kv_heads, "retain: expected indices [{}, n]",
            shape_.num_kv_heads);
  std::vector<at::Tensor> per_head;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) per_head.push_back(indices[h]);
  retain_ragged(per_head);
}

void RaggedLayerCache::retain_ragged(const std::vector<at::Tensor>& per_head) {
  KVC_CHECK(static_cast<int64_t>(per_head.size()) == shape_.num_kv_heads, "retain: expected {} heads",
            shape_.num_kv_heads);
  std::vector<at::Tensor> k, v, p;
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    const at::Tensor idx = per_head[static_cast<size_t>(h)].to(keys_.device(), at::kLong);
    if (idx.numel() > 0) {
      KVC_CHECK(idx.min().item<int64_t>() >= 0 && idx.max().item<int64_t>() < length(h),
                "retain: index out of range for head {} of {} entries", h, length(h));
    }
    k.push_back(head_keys(h).index_select(0, idx));
    v.push_back(head_values(h).index_select(0, idx));
    p.push_back(head_positions(h).index_select(0, idx));
  }
  assign(k, v, p);
}

namespace {

// Erased indices of one head, ascending and distinct, each checked against the head's length.
std::vector<int64_t> erased_indices(const at::Tensor& erased, int64_t head, int64_t length) {
  const at::Tensor flat = erased.to(at::kLong).cpu().contiguous();
  std::vector<int64_t> out(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + flat.numel());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  KVC_CHECK(out.empty() || (out.front() >= 0 && out.back() < length),
            "erase: index out of range for head {} of {} entries", head, length);
  return out;
}

// Moves the rows of `rows` (contiguous, row-major) from `first` on that are not in `gone` up over the gaps;
// runs between gaps move with one memmove each. A decode step drops a few entries near the end, so this
// is a few small moves where tensor indexing would cost more in dispatch than in bytes.
void close_gaps(const at::Tensor& rows, int64_t base, const std::vector<int64_t>& gone, int64_t length) {
  const auto row_bytes = static_cast<size_t>(rows.numel() / std::max<int64_t>(rows.size(0), 1)) * rows.element_size();
  auto* data = static_cast<char*>(rows.data_ptr());
  int64_t write = gone.front();
  for (size_t g = 0; g < gone.size(); ++g) {
    const int64_t from = gone[g] + 1, to = g + 1 < gone.size() ? gone[g + 1] : length;
    if (to > from) {
      std::memmove(data + static_cast<size_t>(base + write) * row_bytes,
                   data + static_cast<size_t>(base + from) * row_bytes, static_cast<size_t>(to - from) * row_bytes);
    }
    write += to - from;
  }
}

}  // namespace

std::unique_ptr<LayerCache> RaggedLayerCache::erase_per_head(const std::vector<at::Tensor>& erased) {
  KVC_CHECK(static_cast<int64_t>(erased.size()) == shape_.num_kv_heads, "erase: expected {} heads",
            shape_.num_kv_heads);
  const bool in_place =
      keys_.device().is_cpu() && keys_.is_contiguous() && values_.is_contiguous() && positions_.is_contiguous();
  for (int64_t h = 0; h < shape_.num_kv_heads; ++h) {
    const std::vector<int64_t> gone = erased_indices(erased[static_cast<size_t>(h)], h, length(h));
    if (gone.empty()) continue;
    const int64_t first = gone.front(), n = length(h);
    if (in_place) {
      for (const at::Tensor* rows : {&keys_, &values_, &positions_}) close_gaps(*rows, start(h), gone, n);
    } else {
      // The entries from the first gap on that stay, moved up to start at the gap.
      at::Tensor stay = at::ones({n - first}, at::kBool);
      stay.index_fill_(0, at::tensor(gone, at::TensorOptions().dtype(at::kLong)) - first, false);
      const at::Tensor from = (stay.nonzero().squeeze(1) + (start(h) + first)).to(keys_.device());
      const int64_t moved = from.numel();
      keys_.narrow(0, start(h) + first, moved).copy_(keys_.index_select(0, from));
      values_.narrow(0, start(h) + first, moved).copy_(values_.index_select(0, from));
      positions_.narrow(0, start(h) + first, moved).copy_(positions_.index_select(0, from));
    }
    length_[static_cast<size_t>(h)] = n - static_cast<int64_t>(gone.size());
  }
  return nullptr;
}

at::Tensor RaggedLayerCache::lengths() const { return at::tensor(length_, at::TensorOptions().dtype(at::kLong)); }

at::Tensor RaggedLayerCache::indptr() const {
  std::vector<int64_t> ends(length_.size() + 1, 0);
  for (size_t h = 0; h < length_.size(); ++h) ends[h + 1] = ends[h] + length_[h];
  return at::tensor(ends, at::TensorOptions().dtype(at::kLong));
}

CacheFootprint RaggedLayerCache::footprint() const {
  CacheFootprint f;
  int64_t rows = 0;
  for (size_t h = 0; h < length_.size(); ++h) {
    f.entries += length_[h];
    rows += capacity_[h];
  }
  const int64_t row_bytes =
      stored_row_bytes(types_.keys, shape_.head_dim) + stored_row_bytes(types_.values, shape_.head_dim);
  f.payload_bytes = f.entries * row_bytes;
  f.ram_bytes = f.payload_bytes;
  f.step_read_bytes = f.payload_bytes;
  f.resident_bytes = rows * (row_bytes + static_cast<int64_t>(sizeof(int64_t))) +
                     static_cast<int64_t>(3 * start_.size() * sizeof(int64_t));
  return f;
}

}  // namespace kvc
