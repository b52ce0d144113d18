#pragma once
// One row per KV head of per-entry bookkeeping (positions, accumulated attention), kept in the cache's
// storage order in a buffer with spare columns, so a decode step appends and evicts in place: with an
// entry evicted every step, reallocating and gathering [n_kv, S] tensors per layer cost more than the
// arithmetic. view() is what scorers read.
#include <ATen/ATen.h>

#include <vector>

namespace kvc {

class TrackedRows {
 public:
  bool defined() const { return view_.defined(); }
  // The rows [n_kv, length] (a view of the buffer; rows are `capacity` apart).
  const at::Tensor& view() const { return view_; }
  int64_t length() const { return defined() ? view_.size(1) : 0; }

  void assign(const at::Tensor& rows);     // [n_kv, S]: copied in (into the buffer when it fits)
  void append(const at::Tensor& columns);  // [n_kv, T] (broadcastable), after the last column
  void append_zeros(int64_t count);
  // Reorders every row as the cache did: row[h][i] = old row[h][order[h][i]], order [n_kv, n] with n
  // at most the length (entries not in `order` are dropped).
  void reorder(const at::Tensor& order);
  // Drops entry slots[h] of row h, the last entry moving into the freed slot, as LayerCache::evict_one
  // moved the cache's entries: O(1) per row. Rows on the CPU.
  void swap_remove(const std::vector<int64_t>& slots);
  void reset() { buffer_ = view_ = at::Tensor(); }

 private:
  void reserve(int64_t columns);
  // view_ = the first `columns` of each row: one as_strided call (a narrow dispatches three).
  void set_length(int64_t columns);

  at::Tensor buffer_;  // [n_kv, capacity]
  at::Tensor view_;
};

}  // namespace kvc
