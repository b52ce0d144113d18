#pragma once
#include <string>

namespace kvc {

// Rouge-L F-measure as LongBench computes it with the `rouge` Python package (summary level, β = 1):
// both texts are cut into sentences at '.', words are whitespace tokens, and
//   LCS∪ = |union over (reference sentence, predicted sentence) pairs of the words of their LCS|,
//   R = LCS∪ / #distinct reference words, P = LCS∪ / #distinct predicted words,
//   F = 2PR / (P + R + 1e-8).
// For one sentence of distinct words this is the plain F1 of LCS precision and recall. A side without
// any sentence (empty, or only dots) scores 0, as the package raises and LongBench catches; so does a
// pair of sentences whose LCS walk is too long for the package's recursive reconstruction under
// Python's recursion limit (about 1000 words; see kMaxLcsWalkSteps).
double rouge_l_score(const std::string& prediction, const std::string& ground_truth);

}  // namespace kvc
