#pragma once
// Errors a user can cause (bad files, flags, budgets) are kvc::Error: one line that names the thing at
// fault. Tools print it as "tool: error: <message>" and exit non-zero. Internal bugs use assert().
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kvc {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A run stopped by Ctrl-C, here or on another rank: tools exit 130 (interrupted), not 1.
class InterruptedError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace kvc

#define KVC_CHECK(cond, ...)               \
  do {                                     \
    if (!(cond)) ::kvc::fail(__VA_ARGS__); \
  } while (0)
