#pragma once
#include <string>

namespace kvc {

// python-Levenshtein's ratio over characters (code points): 1 - indel_distance / (len(a) + len(b)),
// where the indel distance counts insertions and deletions only, i.e. 2·LCS / (len(a) + len(b)).
// Two empty strings are identical: 1.
double edit_similarity(const std::string& a, const std::string& b);

// LongBench code_sim_score: the first line of the prediction (leading newlines dropped) that contains no
// '`', '#' or "//" is compared with the ground truth by fuzzywuzzy's fuzz.ratio / 100, i.e.
// edit_similarity rounded half-to-even to whole percent. No such line compares as "".
double code_sim_score(const std::string& prediction, const std::string& ground_truth);

}  // namespace kvc
