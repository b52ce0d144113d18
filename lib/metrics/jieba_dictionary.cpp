#include "metrics/jieba_dictionary.h"

#include <limits>
#include <string_view>

#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace kvc {

namespace {

uint64_t edge_key(JiebaDictionary::Node parent, char32_t c) { return (uint64_t{parent} << 32) | c; }

// bytes.strip(): ASCII whitespace at both ends.
std::string_view strip_ascii_space(std::string_view line) {
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; };
  while (!line.empty() && is_space(line.front())) line.remove_prefix(1);
  while (!line.empty() && is_space(line.back())) line.remove_suffix(1);
  return line;
}

// A non-negative decimal frequency, or -1 when the text is not one.
int64_t parse_frequency(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  if (text.empty()) return -1;
  int64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return -1;
    if (value > (std::numeric_limits<int64_t>::max() - 9) / 10) return -1;
    value = value * 10 + (c - '0');
  }
  return value;
}

}  // namespace

JiebaDictionary::Node JiebaDictionary::child(Node prefix, char32_t c) const {
  auto it = children_.find(edge_key(prefix, c));
  return it == children_.end() ? kAbsent : it->second;
}

JiebaDictionary::Node JiebaDictionary::add_child(Node prefix, char32_t c) {
  auto [it, inserted] = children_.emplace(edge_key(prefix, c), static_cast<Node>(frequencies_.size()));
  if (inserted) frequencies_.push_back(0);
  return it->second;
}

int64_t JiebaDictionary::frequency_of(const std::u32string& word) const {
  Node node = kRoot;
  for (char32_t c : word) {
    node = child(node, c);
    if (node == kAbsent) return 0;
  }
  return word.empty() ? 0 : frequency(node);
}

JiebaDictionary JiebaDictionary::load(const std::string& path) {
  const std::string contents = read_text_file(path);
  JiebaDictionary dictionary;
  dictionary.frequencies_.push_back(0);
  dictionary.children_.reserve(contents.size() / 8);
  size_t line_start = 0;
  for (size_t line_number = 1; line_start < contents.size(); ++line_number) {
    size_t line_end = contents.find('\n', line_start);
    if (line_end == std::string::npos) line_end = contents.size();
    const std::string_view line =
        strip_ascii_space(std::string_view(contents).substr(line_start, line_end - line_start));
    line_start = line_end + 1;
    // jieba reads "word frequency" from the first two fields split at single spaces.
    const size_t word_end = line.find(' ');
    const size_t frequency_end = word_end == std::string_view::npos ? word_end : line.find(' ', word_end + 1);
    const int64_t frequency = word_end == std::string_view::npos
                                  ? -1
                                  : parse_frequency(line.substr(word_end + 1, frequency_end - word_end - 1));
    KVC_CHECK(frequency >= 0 && utf8_valid(line), "{}:{}: expected 'word frequency [tag]' in UTF-8, got '{}'", path,
              line_number, utf8_lossy(line));
    KVC_CHECK(std::numeric_limits<int64_t>::max() - dictionary.total_ >= frequency,
              "{}:{}: frequencies add up beyond 64 bits", path, line_number);
    const std::u32string word = decode_utf8(std::string(line.substr(0, word_end)));
    Node node = kRoot;
    for (char32_t c : word) node = dictionary.add_child(node, c);
    dictionary.frequencies_[node] = frequency;
    dictionary.total_ += frequency;
  }
  return dictionary;
}

}  // namespace kvc
