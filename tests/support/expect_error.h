#pragma once
// The shape of a library error a user can cause: a kvc::Error whose message is one line naming the problem.
#include <gtest/gtest.h>

#include <string>

#include "util/error.h"

namespace kvc::test {

// Runs `action`, expecting a kvc::Error whose message holds `needle` and is a single line.
template <typename Action>
void expect_error(Action action, const std::string& needle) {
  try {
    action();
    ADD_FAILURE() << "expected kvc::Error containing '" << needle << "'";
  } catch (const kvc::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(needle), std::string::npos) << "message: " << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "message: " << message;
  }
}

}  // namespace kvc::test
