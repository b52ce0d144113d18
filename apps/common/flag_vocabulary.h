#pragma once
// One spelling per meaning across the tools (the README's flag table):
//   -f, --file FILE...   input text          -c, --ctx-size N   length in tokens
//   -o, --output FILE    an output file      --out-dir DIR      an output folder
//   --json               one JSON object on stdout (a switch)
//   --json-out FILE      the same JSON written to a file
// `-` as an output file name means stdout. Old spellings keep working: parse_or_exit rewrites them to
// the standard name before CLI11 sees them, so help shows one name per meaning.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <stdexcept>

#include <string>
#include <utility>
#include <vector>

#include "util/checked_number.h"
#include "util/progress.h"
#include "util/run_files.h"

namespace kvc::cli {

// Old spelling -> standard name. Applied only inside a (sub)command that has the standard name and
// does not use the old one for something else (kvc-make-checkpoint's --context stays its own).
using AliasList = std::vector<std::pair<std::string, std::string>>;

inline const AliasList& legacy_aliases() {
  static const AliasList list = {
      {"--data", "--file"},
      {"--prompt-file", "--file"},
      {"--window", "--ctx-size"},
      {"--context", "--ctx-size"},
      {"--seq-len", "--ctx-size"},
      {"--out", "--out-dir"},
      {"--stats-json", "--json-out"},
      // llama.cpp's short spellings.
      {"-ctk", "--cache-type-k"},
      {"-ctv", "--cache-type-v"},
  };
  return list;
}

// Text input files (one or more).
// Checked while parsing, so that a mistyped path fails before a model loads; "-" (standard input) passes.
inline CLI::Validator readable_file() {
  return CLI::Validator(
      [](std::string& path) -> std::string {
        if (path == "-") return {};
        std::error_code ec;
        if (!std::filesystem::exists(path, ec)) return "file not found: '" + path + "'";
        if (std::filesystem::is_directory(path, ec)) return "'" + path + "' is a folder, not a file";
        note_input_file(path, "an input text (-f/--file)");  // no output of the run may land on it
        return {};
      },
      "FILE");
}

// CLI11 saturates an integer beyond 64 bits to the type's limit (`-n 99999999999999999999` would run as
// INT64_MAX); every integer option refuses such a value instead, naming it and the limit.
inline std::string integer_out_of_range(const std::string& given, bool is_unsigned) {
  const size_t digits = !given.empty() && (given[0] == '+' || given[0] == '-') ? 1 : 0;
  if (digits == given.size() || given.find_first_not_of("0123456789", digits) != std::string::npos)
    return {};  // not an integer: CLI11's conversion reports it
  try {
    if (is_unsigned && given[0] != '-') (void)std::stoull(given);
    else (void)std::stoll(given);
    return {};
  } catch (const std::out_of_range&) {
  }
  return given + " is out of range (" +
         (is_unsigned ? "at most 18446744073709551615" : "from -9223372036854775808 to 9223372036854775807") + ")";
}

// Adds that check to every integer option of `app` and its subcommands.
inline void guard_integer_options(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const bool is_unsigned = type.rfind("UINT", 0) == 0;
    if (!is_unsigned && type.rfind("INT", 0) != 0) continue;
    opt->check(
        CLI::Validator([is_unsigned](std::string& given) { return integer_out_of_range(given, is_unsigned); }, ""));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) guard_integer_options(*sub);
}

// -q/--quiet in every tool (each subcommand of kvc-eval and kvc-cluster): no progress lines on stderr.
// A tool with a -q of its own (kvc-generate: no text either) turns progress off in its own handler.
inline void add_quiet_flags(CLI::App& app) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) add_quiet_flags(*sub);
  if (app.get_option_no_throw("-q") != nullptr || app.get_option_no_throw("--quiet") != nullptr) return;
  app.add_flag_callback(
      "-q,--quiet", [] { set_progress_lines(false); }, "No progress lines on stderr");
}

// A count that must be at least 1 (tokens, steps, repeats); each comma-separated value is checked, and
// the error names the value, not CLI11's numeric range.
inline CLI::Validator positive_count() {
  return CLI::Validator(
      [](std::string& given) -> std::string {
        const auto count = parse_integer(given);  // not a number: CLI11's conversion reports it
        if (count && *count < 1) return given + " is not a positive count (give 1 or more)";
        return {};
      },
      "N>=1");
}

inline CLI::Option* add_text_files(CLI::App& app, std::vector<std::string>& files, const std::string& what) {
  return app.add_option("-f,--file", files, what)->expected(1, -1)->check(readable_file());
}
inline CLI::Option* add_text_file(CLI::App& app, std::string& file, const std::string& what) {
  return app.add_option("-f,--file", file, what)->check(readable_file());
}

template <typename Int>
CLI::Option* add_ctx_size(CLI::App& app, Int& tokens, const std::string& what) {
  return app.add_option("-c,--ctx-size", tokens, what);
}

// An empty path given on purpose ('' from an unset shell variable) would read as "not given" and the
// run would go on without the file the user asked for.
inline std::string refuse_empty_path(const std::string& given) {
  return given.empty() ? "an empty path: give a file or folder name" : std::string();
}

inline CLI::Option* add_output_file(CLI::App& app, std::string& path, const std::string& what) {
  return app.add_option("-o,--output", path, what + " ('-' = stdout)")->check(refuse_empty_path);
}
inline CLI::Option* add_out_dir(CLI::App& app, std::string& dir, const std::string& what) {
  return app.add_option("--out-dir", dir, what)->check(refuse_empty_path);
}

inline CLI::Option* add_json_switch(CLI::App& app, bool& json,
                                    const std::string& what = "Print one JSON object on stdout") {
  return app.add_flag("--json", json, what);
}
inline CLI::Option* add_json_out(CLI::App& app, std::string& path, const std::string& what) {
  return app.add_option("--json-out", path, what + " ('-' = stdout)")->check(refuse_empty_path);
}

}  // namespace kvc::cli
