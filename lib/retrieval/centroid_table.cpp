#include "retrieval/centroid_table.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "util/error.h"

namespace kvc::retrieval {

int64_t CentroidTable::add_row() {
  KVC_CHECK(resident_, "internal: a centroid row added while the table is on storage");
  ++rows_;
  // A quarter more room when full, not the doubling of push_back: a table restored at its exact size
  // and grown by a split or two stays near its size (centroids=storage counts what RAM holds).
  if (data_.size() + static_cast<size_t>(dim_) > data_.capacity()) {
    data_.reserve(std::max(data_.size() * 5 / 4, data_.size() + 16 * static_cast<size_t>(dim_)));
    norms_.reserve(data_.capacity() / static_cast<size_t>(dim_));
  }
  data_.resize(data_.size() + static_cast<size_t>(dim_), 0.0f);
  norms_.push_back(0.0f);
  return size() - 1;
}

void CentroidTable::refresh(int64_t j) {
  double s = 0;
  for (int64_t i = 0; i < dim_; ++i) s += static_cast<double>(row(j)[i]) * row(j)[i];
  norms_[static_cast<size_t>(j)] = static_cast<float>(s);
}

float* CentroidTable::spill(float* out) {
  KVC_CHECK(resident_, "internal: a centroid table spilled twice");
  out = std::copy(data_.begin(), data_.end(), out);
  out = std::copy(norms_.begin(), norms_.end(), out);
  std::vector<float>().swap(data_);  // the memory goes, not only the size
  std::vector<float>().swap(norms_);
  resident_ = false;
  return out;
}

const float* CentroidTable::restore(const float* in) {
  KVC_CHECK(!resident_, "internal: a resident centroid table restored");
  data_.assign(in, in + rows_ * dim_);
  norms_.assign(in + rows_ * dim_, in + rows_ * (dim_ + 1));
  resident_ = true;
  return in + rows_ * (dim_ + 1);
}

void CentroidTable::scores(const float* q, std::vector<float>& out) const {
  KVC_CHECK(resident_, "internal: centroids scored while on storage");
  out.resize(norms_.size());
  if (out.empty()) return;
  const at::Tensor c = at::from_blob(const_cast<float*>(data_.data()), {size(), dim_}, at::kFloat);
  const at::Tensor x = at::from_blob(const_cast<float*>(q), {dim_}, at::kFloat);
  at::Tensor y = at::from_blob(out.data(), {size()}, at::kFloat);
  at::mv_out(y, c, x);
}

void CentroidTable::distances(const float* x, std::vector<float>& out) const {
  scores(x, out);
  for (size_t j = 0; j < out.size(); ++j) out[j] = norms_[j] - 2.0f * out[j];
}

}  // namespace kvc::retrieval
