#include "retrieval/centroid_table.h"

#include <ATen/ATen.h>

namespace kvc::retrieval {

int64_t CentroidTable::add_row() {
  data_.resize(data_.size() + static_cast<size_t>(dim_), 0.0f);
  norms_.push_back(0.0f);
  return size() - 1;
}

void CentroidTable::refresh(int64_t j) {
  double s = 0;
  for (int64_t i = 0; i < dim_; ++i) s += static_cast<double>(row(j)[i]) * row(j)[i];
  norms_[static_cast<size_t>(j)] = static_cast<float>(s);
}

void CentroidTable::scores(const float* q, std::vector<float>& out) const {
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
