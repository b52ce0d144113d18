#include "metrics/zh_metrics.h"

#include <algorithm>
#include <vector>

#include "metrics/chinese_segmenter.h"
#include "metrics/python_unicode.h"
#include "metrics/qa_metrics.h"
#include "metrics/rouge.h"
#include "util/error.h"
#include "util/utf8.h"

namespace kvc {

namespace {

// Python's string.punctuation followed by the Chinese punctuation LongBench lists.
constexpr const char* kPunctuation =
    "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    "！？｡。＂＃＄％＆＇（）＊＋，－／：；＜＝＞＠［＼］＾＿｀｛｜｝～｟｠｢｣､、〃》"
    "「」『』【】〔〕〖〗〘〙〚〛〜〝〞〟〰〾〿–—‘’‛“”„‟…‧﹏.";

bool is_punctuation(char32_t c) {
  static const std::u32string sorted = [] {
    std::u32string chars = decode_utf8(kPunctuation);
    std::sort(chars.begin(), chars.end());
    return chars;
  }();
  return std::binary_search(sorted.begin(), sorted.end(), c);
}

std::vector<std::string> normalized_words(const std::string& text) {
  std::vector<std::string> words;
  for (const auto& token : jieba_cut(text)) {
    std::string word = normalize_zh_answer(token);
    if (!word.empty()) words.push_back(std::move(word));
  }
  return words;
}

std::string join_with_spaces(const std::vector<std::string>& tokens) {
  std::string joined;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) joined.push_back(' ');
    joined += tokens[i];
  }
  return joined;
}

// The digits of the first "段落" followed by a decimal digit, as re.findall(r"段落(\d+)")[0].
std::u32string named_paragraph(const std::u32string& ground_truth) {
  static const std::u32string kMarker = U"段落";
  for (size_t at = ground_truth.find(kMarker); at != std::u32string::npos; at = ground_truth.find(kMarker, at + 1)) {
    size_t end = at + kMarker.size();
    while (end < ground_truth.size() && python_unicode::is_decimal(ground_truth[end])) ++end;
    if (end > at + kMarker.size()) return ground_truth.substr(at + kMarker.size(), end - at - kMarker.size());
  }
  return U"";
}

// re.findall(r"\d+", text): runs of Unicode decimal digits, as written.
std::vector<std::u32string> decimal_runs(const std::u32string& text) {
  std::vector<std::u32string> runs;
  for (size_t i = 0; i < text.size();) {
    size_t end = i;
    while (end < text.size() && python_unicode::is_decimal(text[end])) ++end;
    if (end > i) runs.push_back(text.substr(i, end - i));
    i = std::max(end, i + 1);
  }
  return runs;
}

}  // namespace

std::string normalize_zh_answer(const std::string& text) {
  std::u32string kept;
  for (char32_t c : python_unicode::lower(decode_utf8(text))) {
    if (!is_punctuation(c) && !python_unicode::is_space(c)) kept.push_back(c);
  }
  return encode_utf8(kept);
}

double qa_f1_zh_score(const std::string& prediction, const std::string& ground_truth) {
  return token_f1(normalized_words(prediction), normalized_words(ground_truth));
}

double rouge_zh_score(const std::string& prediction, const std::string& ground_truth) {
  return rouge_l_score(join_with_spaces(jieba_cut(prediction)), join_with_spaces(jieba_cut(ground_truth)));
}

double retrieval_zh_score(const std::string& prediction, const std::string& ground_truth) {
  const std::u32string paragraph = named_paragraph(decode_utf8(ground_truth));
  KVC_CHECK(!paragraph.empty(), "retrieval_zh metric: ground truth '{}' names no '段落N'", ground_truth);
  const auto numbers = decimal_runs(decode_utf8(prediction));
  if (numbers.empty()) return 0.0;
  return static_cast<double>(std::count(numbers.begin(), numbers.end(), paragraph)) / numbers.size();
}

}  // namespace kvc
