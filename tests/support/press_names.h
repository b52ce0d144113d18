#pragma once
// The registered presses a generic test runs at a given --ratio: every method but "none" and those that
// size themselves (simlayerkv, duo_attention, think: press_sizes_itself), which refuse a ratio and have
// tests of their own (test_press_reconstruction.cpp).
#include <string>
#include <vector>

#include "press/press_registry.h"

namespace kvc::test {

inline std::vector<std::string> ratio_presses() {
  std::vector<std::string> out;
  for (const auto& name : press_names())
    if (name != "none" && !press_sizes_itself(name)) out.push_back(name);
  return out;
}

}  // namespace kvc::test
