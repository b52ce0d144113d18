#pragma once
// The shape every tool's user error must have: non-zero exit (not a signal), exactly one line on
// stderr, "tool: error: ..." naming the problem.
#include <gtest/gtest.h>

#include <string>

#include "support/run_command.h"

namespace kvc::test {

inline void expect_clean_error(const CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  ASSERT_FALSE(r.err.empty());
  const std::string first = r.err.substr(0, r.err.find('\n'));
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(first.find(": error: "), std::string::npos) << first;
  EXPECT_NE(first.find(needle), std::string::npos) << "expected '" << needle << "' in: " << first;
}

}  // namespace kvc::test
