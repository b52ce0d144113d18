#pragma once
// LongBench's metrics for its Chinese data sets (metrics.py), on jieba's segmentation
// (metrics/chinese_segmenter.h). They read jieba's dictionary on first use and throw kvc::Error if it
// is not installed.
#include <string>

namespace kvc {

// LongBench normalize_zh_answer: lower-case, drop ASCII and Chinese punctuation, drop all whitespace.
std::string normalize_zh_answer(const std::string& text);

// LongBench qa_f1_zh_score: F1 of the multiset overlap of the jieba words of both strings, each word
// normalised with normalize_zh_answer and dropped when that leaves it empty.
double qa_f1_zh_score(const std::string& prediction, const std::string& ground_truth);

// LongBench rouge_zh_score: rouge_l_score of the jieba words of both strings joined by single spaces.
double rouge_zh_score(const std::string& prediction, const std::string& ground_truth);

// LongBench retrieval_zh_score: the ground truth names "段落N"; the score is the fraction of the numbers
// in the prediction (runs of Unicode decimal digits, as Python's \d+) written exactly as N (0 when it
// has none). Throws kvc::Error if the ground truth names no paragraph.
double retrieval_zh_score(const std::string& prediction, const std::string& ground_truth);

}  // namespace kvc
