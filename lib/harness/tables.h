#pragma once
// Result tables as CSV (for tools) and Markdown (for READMEs).
#include <string>
#include <vector>

namespace kvc {

struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

// RFC 4180: fields with a comma, quote or line break are quoted, quotes doubled.
std::string to_csv(const Table& table);
// One CSV field (RFC 4180): quoted, with its quotes doubled, when it holds a comma, quote or line break.
std::string csv_field(const std::string& s);
// A GitHub pipe table; '|' inside cells is escaped.
std::string to_markdown(const Table& table);
// Fixed-precision number without trailing noise ("0.95", "12.3457").
std::string format_number(double value, int precision = 4);

}  // namespace kvc
