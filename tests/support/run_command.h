#pragma once
// Runs a shell command and captures its exit code, stdout and stderr (for CLI tests).
#include <string>

namespace kvc::test {

struct CommandResult {
  int exit_code = -1;
  std::string out, err;
};

CommandResult run_command(const std::string& command);
// A fresh empty folder under the test temp dir.
std::string make_temp_dir(const std::string& prefix);
std::string slurp(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

}  // namespace kvc::test
