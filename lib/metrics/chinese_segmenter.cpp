#include "metrics/chinese_segmenter.h"

#include <cmath>
#include <cstdlib>

#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace kvc {

namespace {

constexpr const char* kDebianJiebaDir = "/usr/lib/python3/dist-packages/jieba";

// Characters jieba segments with the dictionary (its re_han_default); everything else is emitted one
// character at a time.
bool is_dictionary_char(char32_t c) {
  if (c >= 0x4E00 && c <= 0x9FD5) return true;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return c == '+' || c == '#' || c == '&' || c == '.' || c == '_' || c == '%' || c == '-';
}

bool has_jieba_files(const std::string& dir) {
  return file_exists(dir + "/dict.txt") && is_directory(dir + "/finalseg");
}

// One candidate word starting at some position: its last character and its dictionary frequency.
struct Candidate {
  size_t last;
  int64_t frequency;
};

}  // namespace

ChineseSegmenter ChineseSegmenter::load(const std::string& jieba_dir) {
  ChineseSegmenter segmenter;
  segmenter.dictionary_ = JiebaDictionary::load(jieba_dir + "/dict.txt");
  segmenter.hmm_ = JiebaHmm::load(jieba_dir + "/finalseg");
  KVC_CHECK(segmenter.dictionary_.total() > 0, "{}/dict.txt: no word has a positive frequency", jieba_dir);
  segmenter.log_total_ = std::log(static_cast<double>(segmenter.dictionary_.total()));
  return segmenter;
}

// For each start, the most probable way to segment the rest: words are independent with probability
// frequency / total (an unknown character counts as frequency 1). Equal scores go to the longer first
// word, as Python's max over (score, end) tuples does.
std::vector<size_t> ChineseSegmenter::best_route(const std::u32string& run) const {
  const size_t length = run.size();
  std::vector<double> score(length + 1, 0.0);
  std::vector<size_t> word_end(length + 1, 0);
  std::vector<Candidate> candidates;
  for (size_t start = length; start-- > 0;) {
    candidates.clear();
    JiebaDictionary::Node node = dictionary_.child(JiebaDictionary::kRoot, run[start]);
    for (size_t last = start; node != JiebaDictionary::kAbsent;) {
      if (dictionary_.frequency(node) > 0) candidates.push_back({last, dictionary_.frequency(node)});
      if (++last == length) break;
      node = dictionary_.child(node, run[last]);
    }
    if (candidates.empty()) candidates.push_back({start, 1});
    bool first = true;
    for (const Candidate& candidate : candidates) {
      // Same operation order as jieba: (log(freq) - log(total)) + rest.
      const double candidate_score =
          std::log(static_cast<double>(candidate.frequency)) - log_total_ + score[candidate.last + 1];
      if (first || candidate_score > score[start] ||
          (candidate_score == score[start] && candidate.last + 1 > word_end[start])) {
        score[start] = candidate_score;
        word_end[start] = candidate.last + 1;
        first = false;
      }
    }
  }
  return word_end;
}

// Characters the route left single: one alone is a word; several that together form a dictionary word
// stay single characters; otherwise the HMM decides.
void ChineseSegmenter::flush_single_characters(const std::u32string& pending,
                                               std::vector<std::u32string>& words) const {
  if (pending.empty()) return;
  if (pending.size() == 1) {
    words.push_back(pending);
  } else if (dictionary_.frequency_of(pending) == 0) {
    hmm_.cut(pending, words);
  } else {
    for (char32_t c : pending) words.emplace_back(1, c);
  }
}

void ChineseSegmenter::cut_dictionary_run(const std::u32string& run, std::vector<std::u32string>& words) const {
  const std::vector<size_t> word_end = best_route(run);
  std::u32string pending;
  for (size_t start = 0; start < run.size(); start = word_end[start]) {
    const size_t end = word_end[start];
    if (end - start == 1) {
      pending.push_back(run[start]);
      continue;
    }
    flush_single_characters(pending, words);
    pending.clear();
    words.push_back(run.substr(start, end - start));
  }
  flush_single_characters(pending, words);
}

void ChineseSegmenter::cut_text(const std::u32string& text, std::vector<std::u32string>& words) const {
  size_t start = 0;
  while (start < text.size()) {
    const bool in_dictionary_run = is_dictionary_char(text[start]);
    size_t end = start;
    while (end < text.size() && is_dictionary_char(text[end]) == in_dictionary_run) ++end;
    if (in_dictionary_run) {
      cut_dictionary_run(text.substr(start, end - start), words);
    } else {
      // One token per character, except that a Windows line break stays whole.
      for (size_t i = start; i < end; ++i) {
        const bool crlf = text[i] == '\r' && i + 1 < end && text[i + 1] == '\n';
        words.push_back(text.substr(i, crlf ? 2 : 1));
        i += crlf ? 1 : 0;
      }
    }
    start = end;
  }
}

std::vector<std::string> ChineseSegmenter::cut(const std::string& text) const {
  std::vector<std::u32string> words;
  cut_text(decode_utf8(text), words);
  std::vector<std::string> tokens;
  tokens.reserve(words.size());
  for (const auto& word : words) tokens.push_back(encode_utf8(word));
  return tokens;
}

std::string jieba_data_dir() {
  const char* configured = std::getenv("KVC_JIEBA_DIR");
  if (configured != nullptr && *configured != '\0') {
    KVC_CHECK(has_jieba_files(configured),
              "Chinese scoring needs jieba's dictionary: KVC_JIEBA_DIR={} has no dict.txt and finalseg/ "
              "(install python3-jieba or point KVC_JIEBA_DIR to a jieba folder)",
              configured);
    return configured;
  }
  KVC_CHECK(has_jieba_files(kDebianJiebaDir),
            "Chinese scoring needs jieba's dictionary: install python3-jieba (apt-get install python3-jieba) or "
            "set KVC_JIEBA_DIR to a folder with dict.txt and finalseg/");
  return kDebianJiebaDir;
}

bool jieba_data_available() {
  try {
    jieba_data_dir();
    return true;
  } catch (const Error&) {
    return false;
  }
}

const ChineseSegmenter& default_chinese_segmenter() {
  static const ChineseSegmenter segmenter = ChineseSegmenter::load(jieba_data_dir());
  return segmenter;
}

std::vector<std::string> jieba_cut(const std::string& text) { return default_chinese_segmenter().cut(text); }

}  // namespace kvc
