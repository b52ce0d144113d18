#include "harness/needle_report.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "harness/gnuplot.h"
#include "harness/tables.h"
#include "util/files.h"

namespace kvc {

std::vector<std::vector<double>> NeedleGrid::accuracy() const {
  std::vector<std::vector<double>> acc(depths.size(),
                                       std::vector<double>(lengths.size(), std::numeric_limits<double>::quiet_NaN()));
  for (const auto& c : cells) {
    for (size_t d = 0; d < depths.size(); ++d)
      for (size_t l = 0; l < lengths.size(); ++l)
        if (c.length == lengths[l] && std::abs(c.depth - depths[d]) < 1e-9) acc[d][l] = c.accuracy();
  }
  return acc;
}

int64_t NeedleGrid::sample_count() const {
  int64_t n = 0;
  for (const auto& c : cells) n += static_cast<int64_t>(c.samples.size());
  return n;
}

double NeedleGrid::overall_accuracy() const {
  double sum = 0;
  for (const auto& c : cells)
    for (const auto& s : c.samples) sum += s.score;
  const int64_t n = sample_count();
  return n > 0 ? sum / static_cast<double>(n) : 0.0;
}

nlohmann::json needle_grid_json(const NeedleGrid& grid, const nlohmann::json& metadata) {
  nlohmann::json acc = nlohmann::json::array();
  for (const auto& row : grid.accuracy()) {
    nlohmann::json r = nlohmann::json::array();
    for (double v : row) r.push_back(std::isnan(v) ? nlohmann::json() : nlohmann::json(v));
    acc.push_back(r);
  }
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : grid.cells) cells.push_back(c.to_json());
  return {{"lengths", grid.lengths},
          {"depths", grid.depths},
          {"accuracy_grid", acc},
          {"accuracy_grid_layout", "accuracy_grid[depth index][length index]"},
          {"accuracy", grid.overall_accuracy()},
          {"samples", grid.sample_count()},
          {"cells", cells},
          {"metadata", metadata}};
}

std::string write_needle_report(const std::string& dir, const std::string& title, const NeedleGrid& grid,
                                const nlohmann::json& metadata) {
  write_file_atomic(dir + "/needle_grid.json", needle_grid_json(grid, metadata).dump(2) + "\n");
  const auto acc = grid.accuracy();
  Table t;
  t.columns.push_back("depth \\ length");
  for (auto l : grid.lengths) t.columns.push_back(std::to_string(l));
  std::vector<std::string> row_labels;
  for (size_t d = 0; d < grid.depths.size(); ++d) {
    row_labels.push_back(format_number(grid.depths[d], 3));
    std::vector<std::string> row{row_labels.back()};
    for (double v : acc[d]) row.push_back(std::isnan(v) ? "" : format_number(v, 3));
    t.rows.push_back(row);
  }
  write_file_atomic(dir + "/needle_grid.csv", to_csv(t));
  write_file_atomic(dir + "/needle_grid.md",
                    fmt::format("{}\n\nAccuracy (exact match of the number), depth × prompt length; overall {} "
                                "over {} samples.\n\n{}",
                                title, format_number(grid.overall_accuracy(), 3), grid.sample_count(), to_markdown(t)));
  std::vector<std::string> col_labels;
  for (auto l : grid.lengths) col_labels.push_back(std::to_string(l));
  std::vector<std::vector<double>> shown = acc;
  for (auto& r : shown)
    for (double& v : r)
      if (std::isnan(v)) v = 0;  // missing cells (an interrupted run) draw as 0; the JSON keeps null
  const std::string png = dir + "/needle_heatmap.png";
  return plot_heatmap(png, title, "prompt length (tokens)", "needle depth", col_labels, row_labels, shown) ? png : "";
}

}  // namespace kvc
