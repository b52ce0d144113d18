#pragma once
// Answer-matching metrics for question answering and retrieval. Every score lies in [0, 1].
#include <string>
#include <vector>

namespace kvc {

// F1 of the multiset overlap of two token lists; 0 when nothing overlaps, including when either is empty.
double token_f1(const std::vector<std::string>& predicted, const std::vector<std::string>& expected);

// LongBench qa_f1_score: F1 of the multiset overlap of the whitespace tokens of the normalised strings
// (normalize_answer); 0 when nothing overlaps, including when either side is empty.
double qa_f1_score(const std::string& prediction, const std::string& ground_truth);

// 1 when both strings are equal after normalize_answer, else 0 (SQuAD-style exact match).
double exact_match_score(const std::string& prediction, const std::string& ground_truth);

// RULER string_match_all: the fraction of references found, case-insensitively, as substrings of the
// prediction; 0 when there are no references.
double contains_answer(const std::string& prediction, const std::vector<std::string>& references);

}  // namespace kvc
