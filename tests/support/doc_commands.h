#pragma once
// Commands a user is told to type: the shell blocks of a Markdown file and the "Examples:" section
// of a tool's --help. Tests run them as written, so documentation that drifts from the code fails.
#include <ostream>
#include <string>
#include <vector>

namespace kvc::test {

struct DocBlock {
  std::string name;                   // e.g. "README_block_09" or "kvc-eval_ppl_help"
  std::vector<std::string> commands;  // continuation lines joined, comments removed
};
// GoogleTest prints a parameter with this (its name) instead of its bytes.
inline void PrintTo(const DocBlock& block, std::ostream* os) { *os << block.name; }

// Every ```sh / ```bash block of a Markdown file, in order, named "<prefix>_block_01", "<prefix>_block_02", ...
// (the prefix names the file, so names are unique across files and valid GoogleTest names).
std::vector<DocBlock> markdown_shell_blocks(const std::string& markdown, const std::string& prefix = "README");

// The example commands after a line "Examples:" (or "Example...:") in a --help text, up to the next
// blank line that is followed by a non-indented line; continuation lines are joined.
std::vector<std::string> help_examples(const std::string& help_text);

// The names listed under "Subcommands:" in a CLI11 help text.
std::vector<std::string> help_subcommands(const std::string& help_text);

// Drops a trailing "  # comment" outside quotes; keeps '#' inside quotes and "$#"-like uses.
std::string strip_shell_comment(const std::string& line);

}  // namespace kvc::test
