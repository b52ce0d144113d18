#include "press/tracked_rows.h"

#include <cstring>
#include <vector>

#include "cache/capacity_growth.h"
#include "util/error.h"

namespace kvc {
namespace {

template <typename T>
void reorder_rows(at::Tensor& buffer, int64_t length, const at::Tensor& order) {
  const int64_t rows = buffer.size(0), stride = buffer.stride(0), n = order.size(1);
  const at::Tensor idx = order.to(at::kCPU, at::kLong).contiguous();
  std::vector<T> old(static_cast<size_t>(length));
  T* data = buffer.data_ptr<T>();
  for (int64_t h = 0; h < rows; ++h) {
    T* row = data + h * stride;
    const int64_t* from = idx.data_ptr<int64_t>() + h * n;
    std::memcpy(old.data(), row, static_cast<size_t>(length) * sizeof(T));
    for (int64_t i = 0; i < n; ++i) {
      KVC_CHECK(from[i] >= 0 && from[i] < length, "press bookkeeping: entry {} out of range for {} entries", from[i],
                length);
      row[i] = old[static_cast<size_t>(from[i])];
    }
  }
}

}  // namespace

void TrackedRows::set_length(int64_t columns) {
  view_ = buffer_.as_strided({buffer_.size(0), columns}, {buffer_.stride(0), 1});
}

void TrackedRows::reserve(int64_t columns) {
  if (buffer_.defined() && columns <= buffer_.size(1)) return;
  const int64_t length = this->length();
  const int64_t capacity = buffer_.defined() ? grown_capacity(columns, buffer_.size(1)) : columns;
  at::Tensor grown = at::empty({view_.size(0), capacity}, view_.options());
  if (length > 0) grown.narrow(1, 0, length).copy_(view_);
  buffer_ = grown;
  set_length(length);
}

void TrackedRows::assign(const at::Tensor& rows) {
  const bool fits = buffer_.defined() && buffer_.size(0) == rows.size(0) && buffer_.size(1) >= rows.size(1) &&
                    buffer_.scalar_type() == rows.scalar_type() && buffer_.device() == rows.device();
  if (!fits) buffer_ = at::empty({rows.size(0), rows.size(1)}, rows.options());
  buffer_.narrow(1, 0, rows.size(1)).copy_(rows);
  set_length(rows.size(1));
}

void TrackedRows::append(const at::Tensor& columns) {
  KVC_CHECK(defined(), "press bookkeeping: append before the prefill assigned the rows");
  const int64_t length = this->length(), count = columns.size(-1), rows = buffer_.size(0);
  reserve(length + count);
  // A decode step appends one column to every row: on the CPU, copied in directly, without the views
  // and the broadcasting copy a tensor assignment dispatches.
  const bool same_for_every_row = columns.dim() == 1 || (columns.dim() == 2 && columns.size(0) == 1);
  const bool one_per_row = columns.dim() == 2 && columns.size(0) == rows;
  if (buffer_.is_cpu() && columns.is_cpu() && columns.scalar_type() == buffer_.scalar_type() &&
      columns.is_contiguous() && (same_for_every_row || one_per_row)) {
    const auto bytes = static_cast<size_t>(count) * buffer_.element_size();
    auto* out = static_cast<char*>(buffer_.data_ptr()) + length * buffer_.element_size();
    const auto* in = static_cast<const char*>(columns.data_ptr());
    for (int64_t h = 0; h < rows; ++h) {
      std::memcpy(out + h * buffer_.stride(0) * buffer_.element_size(), same_for_every_row ? in : in + h * bytes,
                  bytes);
    }
  } else {
    buffer_.narrow(1, length, count).copy_(columns);
  }
  set_length(length + count);
}

void TrackedRows::append_zeros(int64_t count) {
  KVC_CHECK(defined(), "press bookkeeping: append before the prefill assigned the rows");
  const int64_t length = this->length();
  reserve(length + count);
  if (buffer_.is_cpu()) {  // all-zero bytes are 0 for the integer and the floating rows alike
    auto* out = static_cast<char*>(buffer_.data_ptr()) + length * buffer_.element_size();
    for (int64_t h = 0; h < buffer_.size(0); ++h) {
      std::memset(out + h * buffer_.stride(0) * buffer_.element_size(), 0,
                  static_cast<size_t>(count) * buffer_.element_size());
    }
  } else {
    buffer_.narrow(1, length, count).zero_();
  }
  set_length(length + count);
}

void TrackedRows::reorder(const at::Tensor& order) {
  KVC_CHECK(order.dim() == 2 && order.size(0) == view_.size(0), "press bookkeeping: expected an order of {} rows",
            view_.size(0));
  const int64_t length = this->length();
  if (!buffer_.device().is_cpu()) {
    buffer_.narrow(1, 0, order.size(1)).copy_(view_.gather(1, order.to(buffer_.device(), at::kLong)));
  } else if (buffer_.scalar_type() == at::kLong) reorder_rows<int64_t>(buffer_, length, order);
  else if (buffer_.scalar_type() == at::kDouble) reorder_rows<double>(buffer_, length, order);
  else fail("press bookkeeping: rows of {} are not supported", c10::toString(buffer_.scalar_type()));
  set_length(order.size(1));
}

void TrackedRows::swap_remove(const std::vector<int64_t>& slots) {
  const int64_t rows = buffer_.size(0), last = length() - 1;
  KVC_CHECK(buffer_.is_cpu() && static_cast<int64_t>(slots.size()) == rows && last >= 0,
            "press bookkeeping: expected {} slots to evict on the CPU", rows);
  const auto size = static_cast<size_t>(buffer_.element_size());
  auto* data = static_cast<char*>(buffer_.data_ptr());
  for (int64_t h = 0; h < rows; ++h) {
    const int64_t slot = slots[static_cast<size_t>(h)];
    KVC_CHECK(slot >= 0 && slot <= last, "press bookkeeping: entry {} out of range for {} entries", slot, last + 1);
    char* row = data + h * buffer_.stride(0) * static_cast<int64_t>(size);
    if (slot < last)
      std::memcpy(row + slot * static_cast<int64_t>(size), row + last * static_cast<int64_t>(size), size);
  }
  set_length(last);
}

}  // namespace kvc
