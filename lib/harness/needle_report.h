#pragma once
// The needle grid as files: needle_grid.json (accuracy[depth][length] + every cell), needle_grid.csv and
// needle_grid.md (depth rows × length columns), needle_heatmap.png (gnuplot).
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/task_eval.h"

namespace kvc {

struct NeedleGrid {
  std::vector<int64_t> lengths;
  std::vector<double> depths;
  std::vector<NeedleCell> cells;  // any order; looked up by (length, depth)
  // accuracy[d][l]; NaN where a cell is missing.
  std::vector<std::vector<double>> accuracy() const;
  double overall_accuracy() const;  // over all samples of all cells
  int64_t sample_count() const;
};

nlohmann::json needle_grid_json(const NeedleGrid& grid, const nlohmann::json& metadata);

// Writes the four files into `dir` (which must exist); `prefix` starts their names ("needle_grid" ...).
// Returns the PNG path, or "" when gnuplot could not render it.
std::string write_needle_report(const std::string& dir, const std::string& title, const NeedleGrid& grid,
                                const nlohmann::json& metadata);

}  // namespace kvc
