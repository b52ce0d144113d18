#pragma once
// LongBench's code_sim_score and the fuzzywuzzy fuzz.ratio behind it.
#include <string>

namespace kvc {

// fuzzywuzzy's fuzz.ratio as LongBench's requirements install it (no python-Levenshtein, so difflib's
// SequenceMatcher): 100 for equal strings (two empty ones included), 0 when just one is empty, else
// round(100 · SequenceMatcher.ratio()) with Python's half-to-even rounding.
int fuzz_ratio(const std::string& a, const std::string& b);

// LongBench code_sim_score: the first line of the prediction (leading newlines dropped) that contains no
// '`', '#' or "//" is compared with the ground truth by fuzz_ratio / 100. No such line compares as "".
double code_sim_score(const std::string& prediction, const std::string& ground_truth);

}  // namespace kvc
