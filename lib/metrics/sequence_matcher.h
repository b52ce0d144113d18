#pragma once
// Python's difflib.SequenceMatcher(None, a, b) over code points, as far as ratio() needs it: this is
// what fuzzywuzzy's fuzz.ratio, and so LongBench's code_sim_score, computes when python-Levenshtein is
// not installed (LongBench's requirements.txt does not list it).
#include <cstddef>
#include <string>

namespace kvc {

// Characters in the matching blocks: difflib finds the longest matching block, then recurses on the
// parts left and right of it. The heuristics that make this differ from a longest common subsequence
// are kept: earliest block on ties, and "autojunk" — when b has 200 or more characters, a character
// occurring more than len(b) // 100 + 1 times cannot start a block (it can still extend one).
size_t sequence_matcher_matches(const std::u32string& a, const std::u32string& b);

// SequenceMatcher.ratio(): 2·matches / (len(a) + len(b)), 1 when both are empty.
double sequence_matcher_ratio(const std::u32string& a, const std::u32string& b);

}  // namespace kvc
