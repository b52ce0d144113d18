#include "harness/tables.h"

#include <fmt/format.h>

#include <cmath>

namespace kvc {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

namespace {

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

}  // namespace

std::string to_csv(const Table& table) {
  std::string out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t i = 0; i < cells.size(); ++i) out += (i ? "," : "") + csv_field(cells[i]);
    out += "\n";
  };
  line(table.columns);
  for (const auto& row : table.rows) line(row);
  return out;
}

std::string to_markdown(const Table& table) {
  std::string out = "|";
  for (const auto& c : table.columns) out += " " + md_cell(c) + " |";
  out += "\n|";
  for (size_t i = 0; i < table.columns.size(); ++i) out += "---|";
  out += "\n";
  for (const auto& row : table.rows) {
    out += "|";
    for (const auto& c : row) out += " " + md_cell(c) + " |";
    out += "\n";
  }
  return out;
}

std::string format_number(double value, int precision) {
  if (!std::isfinite(value)) return value != value ? "nan" : (value > 0 ? "inf" : "-inf");
  std::string s = fmt::format("{:.{}f}", value, precision);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s == "-0" ? "0" : s;
}

}  // namespace kvc
