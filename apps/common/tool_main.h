#pragma once
// Shared front-end plumbing: every tool turns any error into one line "tool: error: ..." and a
// non-zero exit, so bad input never ends in a crash or a backtrace.
#include <c10/util/Exception.h>
#include <CLI/CLI.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "flag_vocabulary.h"
#include "llama_cpp_flags.h"

#include "runtime/thread_policy.h"
#include "util/error.h"
#include "util/interrupt.h"
#include "util/printable.h"

namespace kvc::cli {

inline std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
// One error line, with a user's control characters shown as escapes (util/printable.h).
inline void print_error(const char* tool, const std::string& message) {
  std::fprintf(stderr, "%s: error: %s\n", tool, printable(message).c_str());
}

inline int run_body(const char* tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const CLI::ParseError&) {
    throw;  // handled by the caller's app.exit()
  } catch (const kvc::InterruptedError& e) {
    std::fprintf(stderr, "%s: %s\n", tool, printable(e.what()).c_str());
    return 130;
  } catch (const kvc::Error& e) {
    print_error(tool, e.what());
  } catch (const c10::Error& e) {
    print_error(tool, first_line(e.what_without_backtrace()));
  } catch (const std::exception& e) {
    print_error(tool, first_line(e.what()));
  }
  return 1;
}

// Standard output is checked once at the end: output sent to a full disk or a closed file (`> /dev/full`)
// must not end in exit 0.
inline int check_stdout_at_exit(const char* tool, int code) {
  std::cout.flush();
  const bool flushed = std::fflush(stdout) == 0;
  const int error_number = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return code;
  std::fprintf(stderr, "%s: error: cannot write to standard output: %s\n", tool,
               flushed ? "a write failed (a full disk, or the output was closed)" : std::strerror(error_number));
  return code == 0 ? 1 : code;
}

// Exit status, the same in every tool: 0 done, 1 error, 2 bad usage (parse_or_exit), 130 interrupted
// (Ctrl-C: the tool stopped at a safe point, so `kvc-train ... && kvc-generate ...` does not go on).
inline int run_tool(const char* tool, const std::function<int()>& body) {
  install_interrupt_handler();
  int code = run_body(tool, body);
  if (interrupted()) code = 130;
  return check_stdout_at_exit(tool, code);
}

inline int default_threads() { return kvc::default_thread_count(); }

// Edit distance, for "did you mean" suggestions.
inline size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// Walks the command line as CLI11 will: finds the (sub)command each token belongs to, skips option
// values, rewrites old spellings to the standard names and finds the first token CLI11 cannot place.
class CommandLineWalk {
 public:
  CommandLineWalk(CLI::App& app, AliasList aliases) : app_(app), aliases_(std::move(aliases)) {}

  // Rewrites old option names in place (also "--old=value").
  void rewrite_aliases(std::vector<std::string>& args) const {
    walk(args, [&](std::string& token, CLI::App& cmd) {
      const auto [name, rest] = split_name(token);
      if (cmd.get_option_no_throw(name) != nullptr) return true;
      for (const auto& [old_name, standard] : aliases_) {
        if (old_name == name && cmd.get_option_no_throw(standard) != nullptr) {
          token = standard + rest;
          return true;
        }
      }
      return true;
    });
  }

  // One line for the first llama.cpp flag that its (sub)command does not take; empty if none.
  std::string first_llama_cpp_flag(std::vector<std::string> args) const {
    std::string message;
    walk(args, [&](std::string& token, CLI::App& cmd) {
      const std::string name = split_name(token).first;
      if (!is_option_like(token) || cmd.get_option_no_throw(name) != nullptr) return true;
      if (const std::string* why = llama_cpp_flag_refusal(token)) {
        message = fmt::format("llama.cpp flag '{}' is not supported by kvc: {}", name, *why);
        return false;
      }
      return true;
    });
    return message;
  }

  // One line for the first token that is neither an option of its (sub)command nor a value; empty if none.
  std::string first_unknown(std::vector<std::string> args) const {
    std::string message;
    std::string previous;
    walk(args, [&](std::string& token, CLI::App& cmd) {
      if (find_option(cmd, token) != nullptr) {
        previous = token;
        return true;
      }
      message = describe_unknown(token, previous, cmd);
      return false;
    });
    return message;
  }

 private:
  static std::pair<std::string, std::string> split_name(const std::string& token) {
    const size_t eq = token.rfind("--", 0) == 0 ? token.find('=') : std::string::npos;
    if (eq == std::string::npos) return {token, ""};
    return {token.substr(0, eq), token.substr(eq)};
  }
  // The option a token names: "--name", "--name=value", "-x", or "-xVALUE" (a short option with its value).
  static const CLI::Option* find_option(CLI::App& cmd, const std::string& token) {
    if (const CLI::Option* opt = cmd.get_option_no_throw(split_name(token).first)) return opt;
    if (token.size() > 2 && token[1] != '-') return cmd.get_option_no_throw(token.substr(0, 2));
    return nullptr;
  }
  static bool is_option_like(const std::string& token) {
    if (token.size() < 2 || token[0] != '-') return false;
    return !(std::isdigit(static_cast<unsigned char>(token[1])) || token[1] == '.');  // -1, -0.5: values
  }

  std::string describe_unknown(const std::string& token, const std::string& previous, CLI::App& cmd) const {
    if (!is_option_like(token)) {
      if (previous == "--json") {
        return fmt::format(
            "unexpected argument '{}': --json is a switch (one JSON object on stdout); write a "
            "file with --json-out {}",
            token, token);
      }
      return fmt::format("unexpected argument '{}' (see --help)", token);
    }
    const std::string name = split_name(token).first;
    std::string best, best_old_name;
    size_t best_distance = std::string::npos;
    // An old spelling may be the nearest match; the suggestion is then its standard one.
    const auto consider = [&](const std::string& candidate, const std::string& old_name) {
      const size_t d = edit_distance(name, old_name.empty() ? candidate : old_name);
      if (d < best_distance) best_distance = d, best = candidate, best_old_name = old_name;
    };
    for (const CLI::Option* opt : cmd.get_options()) {
      for (const auto& l : opt->get_lnames()) consider("--" + l, "");
      for (const auto& s : opt->get_snames()) consider("-" + s, "");
    }
    for (const auto& [old_name, standard] : aliases_)
      if (cmd.get_option_no_throw(standard) != nullptr) consider(standard, old_name);
    if (!best.empty() && best_distance <= std::max<size_t>(2, name.size() / 3)) {
      if (!best_old_name.empty())
        return fmt::format("unknown option '{}'; did you mean '{}' (formerly {})?", name, best, best_old_name);
      return fmt::format("unknown option '{}'; did you mean '{}'?", name, best);
    }
    return fmt::format("unknown option '{}' (see --help)", name);
  }

  // Calls visit(token, command) for every option-like or stray token; stops when visit returns false.
  template <typename Visit>
  void walk(std::vector<std::string>& args, Visit visit) const {
    CLI::App* cmd = &app_;
    size_t values_left = 0;  // values still owed to the last option
    bool greedy = false;     // the last option takes a list: values until the next option
    for (auto& token : args) {
      if (token == "--") return;
      const bool option_like = is_option_like(token);
      if (values_left > 0 && !option_like) {  // as CLI11: a value never looks like an option
        --values_left;
        continue;
      }
      values_left = 0;
      if (!option_like) {
        CLI::App* sub = nullptr;
        for (CLI::App* s : cmd->get_subcommands([](CLI::App*) { return true; }))
          if (s->check_name(token)) sub = s;
        if (sub != nullptr) {
          cmd = sub;
          continue;
        }
        if (!cmd->get_options([](CLI::Option* o) { return o->get_positional(); }).empty()) continue;
        if (!visit(token, *cmd)) return;
        continue;
      }
      if (!visit(token, *cmd)) return;
      const CLI::Option* opt = cmd->get_option_no_throw(split_name(token).first);               // not "-xVALUE"
      if (opt != nullptr && opt->get_expected_max() > 0 && split_name(token).second.empty()) {  // not a flag
        greedy = opt->get_items_expected_max() > 1;
        values_left = greedy ? std::numeric_limits<size_t>::max() : 1;
      }
    }
  }

  CLI::App& app_;
  AliasList aliases_;
};

// Parses argv after rewriting old spellings (flag_vocabulary.h). Usage errors exit with code 2 and one
// line: unknown options by name, in the order given, with the nearest valid option.
inline int parse_or_exit(CLI::App& app, int argc, char** argv, const char* tool, AliasList extra_aliases = {}) {
  AliasList aliases = legacy_aliases();
  aliases.insert(aliases.begin(), extra_aliases.begin(), extra_aliases.end());
  const CommandLineWalk walk(app, aliases);
  std::vector<std::string> args(argv + 1, argv + argc);
  walk.rewrite_aliases(args);
  if (const std::string refusal = walk.first_llama_cpp_flag(args); !refusal.empty()) {
    print_error(tool, refusal);
    return 2;
  }
  guard_integer_options(app);
  add_quiet_flags(app);
  std::vector<const char*> rewritten{argv[0]};
  for (const auto& a : args) rewritten.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(rewritten.size()), rewritten.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {  // an option answered while parsing (--list-presses)
    return app.exit(e);
  } catch (const CLI::ExtrasError& e) {
    const std::string unknown = walk.first_unknown(args);
    if (!unknown.empty()) print_error(tool, unknown);
    else print_error(tool, std::string(e.what()) + " (see --help)");
    return 2;
  } catch (const CLI::ParseError& e) {
    print_error(tool, first_line(e.what()) + " (see --help)");
    return 2;
  } catch (const kvc::Error& e) {  // a flag value checked while parsing (e.g. what -m points at)
    print_error(tool, e.what());
    return 2;
  }
  return -1;
}

}  // namespace kvc::cli
