#pragma once
// Shared front-end plumbing: every tool turns any error into one line "tool: error: ..." and a
// non-zero exit, so bad input never ends in a crash or a backtrace.
#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include <cstdio>
#include <functional>
#include <string>
#include <thread>

#include "util/error.h"
#include "util/interrupt.h"

namespace kvc::cli {

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

inline int run_tool(const char* tool, const std::function<int()>& body) {
  install_interrupt_handler();
  try {
    return body();
  } catch (const CLI::ParseError&) {
    throw;  // handled by the caller's app.exit()
  } catch (const kvc::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, e.what());
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, first_line(e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool, first_line(e.what()).c_str());
  }
  return 1;
}

inline int default_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// CLI11 errors ("--foo: not a number") printed by CLI11 itself, exit code 2 for usage errors.
inline int parse_or_exit(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: error: %s (see --help)\n", tool, e.what());
    return 2;
  }
  return -1;
}

}  // namespace kvc::cli
