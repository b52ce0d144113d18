#pragma once
// Chinese word segmentation exactly as Python's jieba 0.42.1 does it with jieba.cut(text) (precise
// mode, HMM on), which LongBench's Chinese metrics score with. The dictionary and HMM tables are read
// at run time from a jieba installation: $KVC_JIEBA_DIR if set, else Debian's python3-jieba.
#include <string>
#include <vector>

#include "metrics/jieba_dictionary.h"
#include "metrics/jieba_hmm.h"

namespace kvc {

class ChineseSegmenter {
 public:
  // `jieba_dir` holds dict.txt and finalseg/prob_{start,trans,emit}.py.
  static ChineseSegmenter load(const std::string& jieba_dir);

  // The tokens of jieba.cut(text, cut_all=False), in order; their concatenation is the text (bytes
  // that are not UTF-8 read as U+FFFD, as they would after Python's decoding with errors="replace").
  std::vector<std::string> cut(const std::string& text) const;

 private:
  void cut_text(const std::u32string& text, std::vector<std::u32string>& words) const;
  void cut_dictionary_run(const std::u32string& run, std::vector<std::u32string>& words) const;
  std::vector<size_t> best_route(const std::u32string& run) const;
  void flush_single_characters(const std::u32string& pending, std::vector<std::u32string>& words) const;

  JiebaDictionary dictionary_;
  JiebaHmm hmm_;
  double log_total_ = 0.0;
};

// The folder the default segmenter reads; throws kvc::Error saying how to install it when missing.
std::string jieba_data_dir();
bool jieba_data_available();

// The segmenter for jieba_data_dir(), loaded on first use (thread-safe); a failed load throws and is
// retried on the next call.
const ChineseSegmenter& default_chinese_segmenter();

// default_chinese_segmenter().cut(text).
std::vector<std::string> jieba_cut(const std::string& text);

}  // namespace kvc
