#pragma once
// The registered presses a generic test runs at a given --ratio: every method but "none" and those that
// size themselves (simlayerkv, duo_attention, think: press_sizes_itself), which refuse a ratio and have
// tests of their own (test_press_reconstruction.cpp), and lukv, which needs a curve made for the model (test_lukv.cpp).
#include <string>
#include <vector>

#include "press/press_registry.h"

namespace kvc::test {

inline std::vector<std::string> ratio_presses() {
  std::vector<std::string> out;
  for (const auto& name : press_names())
    if (name != "none" && !press_sizes_itself(name) && !press_needs_file(name)) out.push_back(name);
  return out;
}

// Presses that move their kept keys to new positions by design (re-rotation): the position and key checks
// of the ratio contract do not hold for them.
inline bool rerotates_keys(const std::string& name) { return name == "key_rerotation" || name == "finch"; }
// Presses that rewrite kept rows in place (re-rotated keys, merged values): a cache of blocks refuses them.
inline bool rewrites_rows(const std::string& name) { return rerotates_keys(name) || name == "merging"; }

}  // namespace kvc::test
