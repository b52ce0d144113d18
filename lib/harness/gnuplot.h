#pragma once
// PNG plots through Debian's gnuplot (gnuplot-nox, pngcairo or png terminal): each plot writes a data
// file and a .gp script next to the PNG, so a figure can be re-rendered or restyled by hand with
// `gnuplot name.gp`.
#include <string>
#include <utility>
#include <vector>

namespace kvc {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), drawn in order
};

// Lines with points, one per series. Returns false (after a warning on stderr) when gnuplot is missing
// or fails; the .dat and .gp files are written either way.
bool plot_lines(const std::string& png_path, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<PlotSeries>& series);

// A heatmap of values[row][column] in [0, 1], rows labelled `row_labels` (y, top row first), columns
// `column_labels` (x); each cell is annotated with its value.
bool plot_heatmap(const std::string& png_path, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::vector<std::string>& column_labels,
                  const std::vector<std::string>& row_labels, const std::vector<std::vector<double>>& values);

// True when `gnuplot` is on $PATH.
bool gnuplot_available();

// `s` as a gnuplot string literal that stays one literal whatever it holds (labels, file names).
std::string gnuplot_quoted(const std::string& s);

// Runs `gnuplot <script>` in the script's folder, without a shell. Returns false (after a warning on
// stderr) when gnuplot is missing, fails, or did not write `png_path`.
bool run_gnuplot(const std::string& script_path, const std::string& png_path);

}  // namespace kvc
