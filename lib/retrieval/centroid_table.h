#pragma once
// The centroids of one KV head's clusters as one contiguous float matrix [clusters, d] with each row's
// squared norm, so a decode step scores every cluster (selection) or finds a new entry's nearest one
// with one matrix-vector product instead of a scalar loop per cluster. The rows can leave RAM (spill)
// and come back (restore) while the table keeps its row count: centroids=storage keeps only the layers
// being computed in memory.
#include <cstdint>
#include <vector>

namespace kvc::retrieval {

class CentroidTable {
 public:
  explicit CentroidTable(int64_t dim = 0) : dim_(dim) {}

  int64_t size() const { return rows_; }
  int64_t dim() const { return dim_; }
  // Appends a zero row and returns its index.
  int64_t add_row();
  float* row(int64_t j) { return data_.data() + j * dim_; }
  const float* row(int64_t j) const { return data_.data() + j * dim_; }
  // Call after row j changed: its squared norm is cached for distances.
  void refresh(int64_t j);

  // scores[j] = q · c_j for every row (q has d values).
  void scores(const float* q, std::vector<float>& out) const;
  // Squared distance from x to each row, up to the constant |x|²: |c_j|² - 2 x · c_j.
  void distances(const float* x, std::vector<float>& out) const;
  int64_t bytes() const { return static_cast<int64_t>(data_.capacity() + norms_.capacity()) * 4; }
  // Floats a spilled table takes: every row and its squared norm.
  int64_t spilled_floats() const { return rows_ * (dim_ + 1); }

  bool resident() const { return resident_; }
  // Writes the rows and their norms to `out` (spilled_floats() of them) and frees them here; size() is
  // kept. Returns the first float after them.
  float* spill(float* out);
  // Takes back what spill() wrote, from `in`; returns the first float after it.
  const float* restore(const float* in);

 private:
  int64_t dim_;
  int64_t rows_ = 0;
  bool resident_ = true;
  std::vector<float> data_;
  std::vector<float> norms_;
};

}  // namespace kvc::retrieval
