#include "kernels/block_matrix.h"

#include <algorithm>

#include "util/error.h"

namespace kvc {

void BlockMatrix::append(BlockType type, const uint8_t* data, int64_t rows, std::vector<int32_t> output_rows) {
  const BlockFormat& f = block_format(type);
  KVC_CHECK(cols_ % f.values == 0, "a row of {} values is not a whole number of {}-value {} blocks", cols_, f.values,
            f.name);
  KVC_CHECK(output_rows.empty() || static_cast<int64_t>(output_rows.size()) == rows,
            "an output order of {} rows for a segment of {}", output_rows.size(), rows);
  std::vector<int32_t> stored(output_rows.size(), -1);
  for (size_t r = 0; r < output_rows.size(); ++r) {
    const int32_t out = output_rows[r];
    KVC_CHECK(out >= 0 && out < rows && stored[static_cast<size_t>(out)] < 0,
              "the output order of a segment of {} rows "
              "is not a permutation",
              rows);
    stored[static_cast<size_t>(out)] = static_cast<int32_t>(r);
  }
  segments_.push_back({type, data, rows_, rows, block_row_bytes(f, cols_), std::move(output_rows), std::move(stored)});
  rows_ += rows;
}

int64_t BlockMatrix::bytes() const {
  int64_t total = 0;
  for (const BlockSegment& s : segments_) total += s.rows * s.row_bytes;
  return total;
}

const BlockSegment& BlockMatrix::segment_of(int64_t row) const {
  const auto it = std::upper_bound(segments_.begin(), segments_.end(), row,
                                   [](int64_t r, const BlockSegment& s) { return r < s.first_row; });
  return *(it - 1);
}

const uint8_t* BlockMatrix::stored_row(int64_t row) const {
  const BlockSegment& s = segment_of(row);
  const int64_t local = row - s.first_row;
  return s.data + (s.stored_rows.empty() ? local : s.stored_rows[static_cast<size_t>(local)]) * s.row_bytes;
}

}  // namespace kvc
