#pragma once
// jieba's prefix dictionary (dict.txt): every word with its frequency, and every prefix of a word, so
// that the segmenter can stop extending a candidate as soon as no word starts with it.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvc {

class JiebaDictionary {
 public:
  using Node = uint32_t;
  static constexpr Node kRoot = 0;
  static constexpr Node kAbsent = UINT32_MAX;

  // Reads dict.txt ("word frequency [tag]" per line). A later line for the same word replaces its
  // frequency, but every line counts towards the total, as jieba does. Throws kvc::Error naming
  // path:line for a malformed line.
  static JiebaDictionary load(const std::string& path);

  // The node for `prefix` followed by `c`, or kAbsent when no word starts that way.
  Node child(Node prefix, char32_t c) const;
  // 0 for a prefix that is not itself a word.
  int64_t frequency(Node node) const { return frequencies_[node]; }
  // Frequency of a whole string, 0 when it is not a word.
  int64_t frequency_of(const std::u32string& word) const;
  int64_t total() const { return total_; }

 private:
  Node add_child(Node prefix, char32_t c);

  std::vector<int64_t> frequencies_;             // by node; the root is the empty prefix
  std::unordered_map<uint64_t, Node> children_;  // (parent node, code point) -> child node
  int64_t total_ = 0;
};

}  // namespace kvc
