#include "support/doc_commands.h"

#include <cstdio>
#include <sstream>

namespace kvc::test {
namespace {

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

bool ends_with_backslash(const std::string& s) { return !s.empty() && s.back() == '\\'; }

// Joins "a \" + "b" into "a b" and drops comments and blank lines.
std::vector<std::string> join_commands(const std::vector<std::string>& lines) {
  std::vector<std::string> commands;
  std::string pending;
  for (const std::string& raw : lines) {
    std::string line = trim(strip_shell_comment(raw));
    if (pending.empty() && line.empty()) continue;
    if (ends_with_backslash(line)) {
      line.pop_back();
      pending += trim(line) + " ";
      continue;
    }
    pending += line;
    if (!trim(pending).empty()) commands.push_back(trim(pending));
    pending.clear();
  }
  if (!trim(pending).empty()) commands.push_back(trim(pending));
  return commands;
}

}  // namespace

std::string strip_shell_comment(const std::string& line) {
  bool single = false, dbl = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '\\' && !single && i + 1 < line.size()) {
      ++i;
      continue;
    }
    if (c == '\'' && !dbl) single = !single;
    if (c == '"' && !single) dbl = !dbl;
    if (c == '#' && !single && !dbl && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) return line.substr(0, i);
  }
  return line;
}

std::vector<DocBlock> markdown_shell_blocks(const std::string& markdown, const std::string& prefix) {
  std::vector<DocBlock> blocks;
  std::istringstream in(markdown);
  std::string line;
  bool inside = false;
  std::vector<std::string> lines;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (!inside && (t == "```sh" || t == "```bash")) {
      inside = true;
      lines.clear();
    } else if (inside && t.rfind("```", 0) == 0) {
      inside = false;
      char number[32];
      std::snprintf(number, sizeof number, "_block_%02zu", blocks.size() + 1);
      blocks.push_back({prefix + number, join_commands(lines)});
    } else if (inside) {
      lines.push_back(line);
    }
  }
  return blocks;
}

std::vector<std::string> help_examples(const std::string& help_text) {
  std::istringstream in(help_text);
  std::string line;
  bool inside = false;
  std::vector<std::string> lines;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (!inside) {
      if (t.rfind("Example", 0) == 0 && !t.empty() && t.back() == ':') inside = true;
      else if (t.rfind("Example", 0) == 0 && t.find("):") != std::string::npos) inside = true;
      continue;
    }
    if (t.empty()) continue;
    if (line.find_first_not_of(" \t") == 0) break;  // the next unindented section ends the examples
    lines.push_back(line);
  }
  return join_commands(lines);
}

std::vector<std::string> help_subcommands(const std::string& help_text) {
  std::istringstream in(help_text);
  std::string line;
  bool inside = false;
  std::vector<std::string> names;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (t == "Subcommands:" || t == "SUBCOMMANDS:") {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (t.empty() || line.find_first_not_of(" \t") == 0) break;
    names.push_back(t.substr(0, t.find_first_of(" \t")));
  }
  return names;
}

}  // namespace kvc::test
