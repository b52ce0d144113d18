#pragma once
// A warning on stderr printed once per process for each key: an evaluation scores thousands of prompts
// through the same configuration, and the first one's line says what every one of them would.
#include <string>

namespace kvc {

// Prints "warning: <text>" unless a warning with this key was printed before; returns whether it printed.
bool warn_once(const std::string& key, const std::string& text);

}  // namespace kvc
