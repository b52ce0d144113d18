#include "metrics/jieba_hmm.h"

#include "metrics/python_dict_literal.h"
#include "metrics/python_unicode.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {

namespace {

// jieba's stand-in for log(0): finite, so that sums and comparisons behave as in Python.
constexpr double kMinLogProbability = -3.14e100;

constexpr int B = 0, M = 1, E = 2, S = 3;
// The tag letters: Python compares (score, letter) tuples, so equal scores go to the later letter.
constexpr char kTagLetter[] = {'B', 'M', 'E', 'S'};
// The tags that may precede each tag, in jieba's order.
constexpr int kPrevious[4][2] = {{E, S}, {M, B}, {B, M}, {S, E}};

int tag_index(const std::u32string& key) {
  for (int tag = 0; tag < 4; ++tag) {
    if (key.size() == 1 && key[0] == static_cast<char32_t>(kTagLetter[tag])) return tag;
  }
  return -1;
}

// The top-level dict of one table file, by tag; keys must be tags, values of the expected kind.
std::array<const PythonDictValue*, 4> tag_entries(const PythonDictValue& table, bool values_are_dicts,
                                                  const std::string& path) {
  std::array<const PythonDictValue*, 4> by_tag{};
  KVC_CHECK(table.is_dict, "{}: P is not a dict", path);
  for (const auto& [key, value] : table.entries) {
    const int tag = tag_index(key);
    KVC_CHECK(tag >= 0 && value.is_dict == values_are_dicts, "{}: unexpected entry in P (keys must be B, M, E, S)",
              path);
    by_tag[tag] = &value;
  }
  for (int tag = 0; tag < 4; ++tag) KVC_CHECK(by_tag[tag] != nullptr, "{}: P has no '{}' entry", path, kTagLetter[tag]);
  return by_tag;
}

PythonDictValue read_table(const std::string& path) {
  return parse_python_dict_assignment(read_text_file(path), "P", path);
}

bool is_chinese(char32_t c) { return c >= 0x4E00 && c <= 0x9FD5; }
bool is_ascii_alphanumeric(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Length of a match of [a-zA-Z0-9]+(?:\.\d+)?%? at `start`, 0 if none.
size_t number_or_word_length(const std::u32string& text, size_t start) {
  size_t end = start;
  while (end < text.size() && is_ascii_alphanumeric(text[end])) ++end;
  if (end == start) return 0;
  if (end + 1 < text.size() && text[end] == '.' && python_unicode::is_decimal(text[end + 1])) {
    end += 2;
    while (end < text.size() && python_unicode::is_decimal(text[end])) ++end;
  }
  if (end < text.size() && text[end] == '%') ++end;
  return end - start;
}

// Non-Chinese text: letter/digit runs (with a decimal part and percent sign) are words, and so is
// each stretch between them.
void cut_other(const std::u32string& text, std::vector<std::u32string>& words) {
  size_t gap_start = 0, pos = 0;
  while (pos < text.size()) {
    const size_t length = number_or_word_length(text, pos);
    if (length == 0) {
      ++pos;
      continue;
    }
    if (pos > gap_start) words.push_back(text.substr(gap_start, pos - gap_start));
    words.push_back(text.substr(pos, length));
    pos += length;
    gap_start = pos;
  }
  if (pos > gap_start) words.push_back(text.substr(gap_start, pos - gap_start));
}

}  // namespace

JiebaHmm JiebaHmm::load(const std::string& finalseg_dir) {
  JiebaHmm hmm;
  const std::string start_path = finalseg_dir + "/prob_start.py";
  const PythonDictValue start_table = read_table(start_path);  // tag_entries points into it: keep it alive
  const auto start = tag_entries(start_table, false, start_path);
  for (int tag = 0; tag < kStates; ++tag) hmm.start_[tag] = start[tag]->number;

  const std::string transition_path = finalseg_dir + "/prob_trans.py";
  const PythonDictValue transition_table = read_table(transition_path);
  const auto transition = tag_entries(transition_table, true, transition_path);
  for (int from = 0; from < kStates; ++from) {
    hmm.transition_[from].fill(kMinLogProbability);  // a missing transition is impossible
    for (const auto& [key, value] : transition[from]->entries) {
      const int to = tag_index(key);
      KVC_CHECK(to >= 0 && !value.is_dict, "{}: unexpected entry under '{}'", transition_path, kTagLetter[from]);
      hmm.transition_[from][to] = value.number;
    }
  }

  const std::string emission_path = finalseg_dir + "/prob_emit.py";
  const PythonDictValue emission_table = read_table(emission_path);
  const auto emission = tag_entries(emission_table, true, emission_path);
  for (int tag = 0; tag < kStates; ++tag) {
    for (const auto& [key, value] : emission[tag]->entries) {
      KVC_CHECK(key.size() == 1 && !value.is_dict, "{}: emission keys must be single characters with numbers",
                emission_path);
      hmm.emission_[tag][key[0]] = value.number;
    }
  }
  return hmm;
}

double JiebaHmm::emission(int state, char32_t c) const {
  auto it = emission_[state].find(c);
  return it == emission_[state].end() ? kMinLogProbability : it->second;
}

std::vector<int> JiebaHmm::best_tags(const std::u32string& text) const {
  const size_t length = text.size();
  std::vector<Scores> score(length);
  std::vector<std::array<int, kStates>> previous(length);
  for (int tag = 0; tag < kStates; ++tag) score[0][tag] = start_[tag] + emission(tag, text[0]);
  for (size_t t = 1; t < length; ++t) {
    for (int tag = 0; tag < kStates; ++tag) {
      const double emitted = emission(tag, text[t]);
      int best = -1;
      double best_score = 0.0;
      for (int from : kPrevious[tag]) {
        // Same association as Python: (previous + transition) + emission.
        const double candidate = score[t - 1][from] + transition_[from][tag] + emitted;
        if (best < 0 || candidate > best_score || (candidate == best_score && kTagLetter[from] > kTagLetter[best])) {
          best = from;
          best_score = candidate;
        }
      }
      score[t][tag] = best_score;
      previous[t][tag] = best;
    }
  }
  // A word must be complete at the end: the last tag is E or S, S winning a tie.
  int tag = score[length - 1][S] >= score[length - 1][E] ? S : E;
  std::vector<int> tags(length);
  for (size_t t = length; t-- > 0;) {
    tags[t] = tag;
    tag = previous[t][tag];
  }
  return tags;
}

void JiebaHmm::cut_chinese(const std::u32string& text, std::vector<std::u32string>& words) const {
  const std::vector<int> tags = best_tags(text);
  size_t begin = 0, next = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (tags[i] == B) {
      begin = i;
    } else if (tags[i] == E) {
      words.push_back(text.substr(begin, i + 1 - begin));
      next = i + 1;
    } else if (tags[i] == S) {
      words.push_back(text.substr(i, 1));
      next = i + 1;
    }
  }
  if (next < text.size()) words.push_back(text.substr(next));
}

void JiebaHmm::cut(const std::u32string& text, std::vector<std::u32string>& words) const {
  size_t start = 0;
  while (start < text.size()) {
    const bool chinese = is_chinese(text[start]);
    size_t end = start;
    while (end < text.size() && is_chinese(text[end]) == chinese) ++end;
    const std::u32string run = text.substr(start, end - start);
    if (chinese) {
      cut_chinese(run, words);
    } else {
      cut_other(run, words);
    }
    start = end;
  }
}

}  // namespace kvc
