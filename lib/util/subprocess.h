#pragma once
// Runs another program without a shell: the arguments reach it as given, so no user string (a
// folder name, a label) can become a command. The only programs kvc runs are plotting tools.
#include <optional>
#include <string>
#include <vector>

namespace kvc {

struct ProgramResult {
  int exit_code = -1;  // 128 + signal number when a signal ended it
  std::string output;  // standard output and standard error together
};

// True when `name` is an executable file in one of $PATH's folders.
bool program_on_path(const std::string& name);

// Runs argv[0] (looked up in $PATH) with argv[1..] in `folder`, standard input from /dev/null, and
// waits for it. nullopt when it could not be started.
std::optional<ProgramResult> run_program(const std::vector<std::string>& argv, const std::string& folder = ".");

}  // namespace kvc
