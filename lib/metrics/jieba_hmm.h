#pragma once
// jieba's hidden Markov model for words the dictionary does not know (its finalseg module): each
// Chinese character is tagged B(egin), M(iddle), E(nd) or S(ingle) by Viterbi decoding, and the tags
// give the words. Runs of letters and digits are kept whole instead.
#include <array>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvc {

class JiebaHmm {
 public:
  // Reads prob_start.py, prob_trans.py and prob_emit.py from jieba's finalseg folder.
  static JiebaHmm load(const std::string& finalseg_dir);

  // Appends the words of `text` (characters the dictionary route left as single characters).
  void cut(const std::u32string& text, std::vector<std::u32string>& words) const;

 private:
  static constexpr int kStates = 4;  // B, M, E, S
  using Scores = std::array<double, kStates>;

  void cut_chinese(const std::u32string& text, std::vector<std::u32string>& words) const;
  std::vector<int> best_tags(const std::u32string& text) const;
  double emission(int state, char32_t c) const;

  Scores start_{};
  std::array<Scores, kStates> transition_{};  // [from][to]
  std::array<std::unordered_map<char32_t, double>, kStates> emission_;
};

}  // namespace kvc
