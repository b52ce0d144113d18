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

void TrackedRows::reserve(int64_t columns) {
  if (buffer_.defined() && columns <= buffer_.size(1)) return;
  const int64_t length = this->length();
  const int64_t capacity = buffer_.defined() ? grown_capacity(columns, buffer_.size(1)) : columns;
  at::Tensor grown = at::empty({view_.size(0), capacity}, view_.options());
  if (length > 0) grown.narrow(1, 0, length).copy_(view_);
  buffer_ = grown;
  view_ = buffer_.narrow(1, 0, length);
}

void TrackedRows::assign(const at::Tensor& rows) {
  const bool fits = buffer_.defined() && buffer_.size(0) == rows.size(0) && buffer_.size(1) >= rows.size(1) &&
                    buffer_.scalar_type() == rows.scalar_type() && buffer_.device() == rows.device();
  if (!fits) buffer_ = at::empty({rows.size(0), rows.size(1)}, rows.options());
  buffer_.narrow(1, 0, rows.size(1)).copy_(rows);
  view_ = buffer_.narrow(1, 0, rows.size(1));
}

void TrackedRows::append(const at::Tensor& columns) {
  KVC_CHECK(defined(), "press bookkeeping: append before the prefill assigned the rows");
  const int64_t length = this->length(), count = columns.size(-1);
  reserve(length + count);
  buffer_.narrow(1, length, count).copy_(columns);
  view_ = buffer_.narrow(1, 0, length + count);
}

void TrackedRows::append_zeros(int64_t count) {
  KVC_CHECK(defined(), "press bookkeeping: append before the prefill assigned the rows");
  const int64_t length = this->length();
  reserve(length + count);
  buffer_.narrow(1, length, count).zero_();
  view_ = buffer_.narrow(1, 0, length + count);
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
  view_ = buffer_.narrow(1, 0, order.size(1));
}

}  // namespace kvc
