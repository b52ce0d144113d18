#include "harness/gnuplot.h"

#include <fmt/format.h>

#include <cstdio>

#include "util/error.h"
#include "util/files.h"
#include "util/subprocess.h"

namespace kvc {

// gnuplot single-quoted strings take everything literally (no escapes, no backquote substitution)
// but the quote itself, doubled; a newline would end the command, so it becomes a space.
std::string gnuplot_quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') out += "''";
    else if (c == '\n' || c == '\r') out += ' ';
    else out += c;
  }
  return out + "'";
}

namespace {

std::string quoted(const std::string& s) { return gnuplot_quoted(s); }

std::string stem(const std::string& png_path) {
  const size_t dot = png_path.rfind(".png");
  return dot == std::string::npos ? png_path : png_path.substr(0, dot);
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string folder_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

}  // namespace

bool run_gnuplot(const std::string& script_path, const std::string& png_path) {
  if (!gnuplot_available()) {
    std::fprintf(stderr, "warning: gnuplot not found (apt-get install gnuplot-nox); wrote %s without rendering %s\n",
                 script_path.c_str(), png_path.c_str());
    return false;
  }
  // The script names its files relative to its own folder, so it can be re-run from there. No shell:
  // the folder and file names reach gnuplot as they are.
  const auto result = run_program({"gnuplot", base_name(script_path)}, folder_of(script_path));
  if (!result || result->exit_code != 0 || !file_exists(png_path)) {
    std::fprintf(stderr, "warning: gnuplot failed on %s: %s\n", script_path.c_str(),
                 result ? result->output.c_str() : "it could not be started");
    return false;
  }
  return true;
}

namespace {

// pngcairo draws antialiased text; the plain png terminal is the fallback in minimal builds.
std::string terminal(int width, int height) {
  return fmt::format(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{ set terminal pngcairo size {0},{1} font 'sans,10' noenhanced "
      "}} "
      "else {{ set terminal png size {0},{1} noenhanced }}\n",
      width, height);
}

// A colour, dash and point shape per series: colours cycle first, then the dash pattern changes, and
// the point shape cycles on its own, so up to 50 series differ in colour+dash and 13 also in shape.
std::string series_style(size_t i) {
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  static const int kPoints[] = {7, 5, 9, 11, 13, 1, 2, 3, 4, 6, 8, 10, 12};
  constexpr size_t kColourCount = sizeof kColours / sizeof kColours[0];
  constexpr size_t kPointCount = sizeof kPoints / sizeof kPoints[0];
  return fmt::format("lc rgb '{}' dt {} pt {}", kColours[i % kColourCount], 1 + (i / kColourCount) % 5,
                     kPoints[i % kPointCount]);
}

}  // namespace

bool gnuplot_available() { return program_on_path("gnuplot"); }

bool plot_lines(const std::string& png_path, const std::string& title, const std::string& xlabel,
                const std::string& ylabel, const std::vector<PlotSeries>& series) {
  const std::string base = stem(png_path);
  std::string data;
  for (const auto& s : series) {
    data += "# " + s.name + "\n";
    for (const auto& [x, y] : s.points) data += fmt::format("{} {}\n", x, y);
    data += "\n\n";  // gnuplot data blocks are separated by two blank lines (index i)
  }
  write_file_atomic(base + ".dat", data);
  std::string gp = terminal(800, 500);
  gp += "set output " + quoted(base_name(png_path)) + "\n";
  gp += "set title " + quoted(title) + " noenhanced\n";
  gp += "set xlabel " + quoted(xlabel) + " noenhanced\nset ylabel " + quoted(ylabel) + " noenhanced\n";
  gp += "set key outside right noenhanced\nset grid\nset xrange [-0.02:1]\n";
  if (series.empty()) {
    gp += "set label 'no data' at graph 0.5,0.5 center\nplot NaN notitle\n";
  } else {
    gp += "plot ";
    for (size_t i = 0; i < series.size(); ++i) {
      gp += fmt::format("{}{} index {} using 1:2 with linespoints {} lw 2 title {}", i ? ", \\\n     " : "",
                        quoted(base_name(base) + ".dat"), i, series_style(i), quoted(series[i].name));
    }
    gp += "\n";
  }
  write_file_atomic(base + ".gp", gp);
  return run_gnuplot(base + ".gp", png_path);
}

bool plot_heatmap(const std::string& png_path, const std::string& title, const std::string& xlabel,
                  const std::string& ylabel, const std::vector<std::string>& column_labels,
                  const std::vector<std::string>& row_labels, const std::vector<std::vector<double>>& values) {
  KVC_CHECK(values.size() == row_labels.size(), "heatmap: {} rows but {} labels", values.size(), row_labels.size());
  const std::string base = stem(png_path);
  // "x y value" triples on the integer grid; row 0 drawn at the top.
  std::string data;
  const size_t rows = values.size();
  for (size_t r = 0; r < rows; ++r) {
    KVC_CHECK(values[r].size() == column_labels.size(), "heatmap: row {} has {} values for {} columns", r,
              values[r].size(), column_labels.size());
    for (size_t c = 0; c < column_labels.size(); ++c) data += fmt::format("{} {} {}\n", c, rows - 1 - r, values[r][c]);
    data += "\n";
  }
  write_file_atomic(base + ".dat", data);
  std::string gp =
      terminal(100 + 110 * static_cast<int>(column_labels.size()) + 160, 120 + 60 * static_cast<int>(rows));
  gp += "set output " + quoted(base_name(png_path)) + "\n";
  gp += "set title " + quoted(title) + " noenhanced\n";
  gp += "set xlabel " + quoted(xlabel) + " noenhanced\nset ylabel " + quoted(ylabel) + " noenhanced\n";
  gp += "set cbrange [0:1]\nset cblabel 'accuracy'\nset palette defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')\n";
  gp += fmt::format("set xrange [-0.5:{}]\nset yrange [-0.5:{}]\n", column_labels.size() - 0.5, rows - 0.5);
  gp += "set xtics (";
  for (size_t c = 0; c < column_labels.size(); ++c)
    gp += fmt::format("{}{} {}", c ? ", " : "", quoted(column_labels[c]), c);
  gp += ")\nset ytics (";
  for (size_t r = 0; r < rows; ++r) gp += fmt::format("{}{} {}", r ? ", " : "", quoted(row_labels[r]), rows - 1 - r);
  gp += ")\nset tics scale 0\nunset key\n";
  gp += fmt::format("plot {0} using 1:2:3 with image, {0} using 1:2:(sprintf('%.2f', $3)) with labels font ',10'\n",
                    quoted(base_name(base) + ".dat"));
  write_file_atomic(base + ".gp", gp);
  return run_gnuplot(base + ".gp", png_path);
}

}  // namespace kvc
