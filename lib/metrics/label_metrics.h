#pragma once
// LongBench metrics whose answer is a label or a number rather than free text.
#include <string>
#include <vector>

namespace kvc {

// LongBench classification_score: the classes occurring (case-sensitively) in the prediction are
// collected; those that are substrings of the ground truth but not equal to it are dropped; the score is
// 1 / (number left) when the ground truth is among them, else 0. LongBench drops them with list.remove()
// inside a loop over the same list, which skips the class after each one removed; that is reproduced so
// that scores agree with published ones.
double classification_score(const std::string& prediction, const std::string& ground_truth,
                            const std::vector<std::string>& all_classes);

// LongBench retrieval_score: the ground truth names "Paragraph N"; the score is the fraction of the
// numbers in the prediction that equal N (0 when it has none). Throws kvc::Error if the ground truth
// names no paragraph.
double retrieval_score(const std::string& prediction, const std::string& ground_truth);

// LongBench count_score: the fraction of the numbers in the prediction that equal the ground truth.
// Numbers are runs of decimal digits of any script (Python's \d), compared as written: "１２" != "12".
double count_score(const std::string& prediction, const std::string& ground_truth);

}  // namespace kvc
