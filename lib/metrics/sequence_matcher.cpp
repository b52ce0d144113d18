#include "metrics/sequence_matcher.h"

#include <unordered_map>
#include <utility>
#include <vector>

namespace kvc {

namespace {

struct Block {
  size_t a_begin, b_begin, size;
};

struct Span {
  size_t a_begin, a_end, b_begin, b_end;
};

class Matcher {
 public:
  Matcher(const std::u32string& a, const std::u32string& b)
      : a_(a), b_(b), run_ending_at_(b.size() + 1, 0), previous_run_(b.size() + 1, 0) {
    for (size_t j = 0; j < b.size(); ++j) positions_in_b_[b[j]].push_back(j);
    // autojunk: characters that are too frequent in a long b are not indexed.
    if (b.size() >= 200) {
      const size_t limit = b.size() / 100 + 1;
      for (auto it = positions_in_b_.begin(); it != positions_in_b_.end();) {
        it = it->second.size() > limit ? positions_in_b_.erase(it) : std::next(it);
      }
    }
  }

  size_t matching_characters() {
    size_t total = 0;
    std::vector<Span> pending = {{0, a_.size(), 0, b_.size()}};
    while (!pending.empty()) {
      const Span span = pending.back();
      pending.pop_back();
      const Block block = longest_match(span);
      if (block.size == 0) continue;
      total += block.size;
      if (span.a_begin < block.a_begin && span.b_begin < block.b_begin) {
        pending.push_back({span.a_begin, block.a_begin, span.b_begin, block.b_begin});
      }
      if (block.a_begin + block.size < span.a_end && block.b_begin + block.size < span.b_end) {
        pending.push_back({block.a_begin + block.size, span.a_end, block.b_begin + block.size, span.b_end});
      }
    }
    return total;
  }

 private:
  // find_longest_match: the longest run of indexed characters, the earliest in a and then in b on ties,
  // then widened by equal characters on both sides (unindexed ones included).
  Block longest_match(const Span& span) {
    Block best{span.a_begin, span.b_begin, 0};
    // run_ending_at_[j + 1]: length of the run ending at a[i] and b[j]; previous_run_ for a[i - 1].
    std::vector<size_t> written, previously_written;
    for (size_t i = span.a_begin; i < span.a_end; ++i) {
      auto found = positions_in_b_.find(a_[i]);
      if (found != positions_in_b_.end()) {
        for (size_t j : found->second) {
          if (j < span.b_begin) continue;
          if (j >= span.b_end) break;
          const size_t length = previous_run_[j] + 1;
          run_ending_at_[j + 1] = length;
          written.push_back(j + 1);
          if (length > best.size) best = {i + 1 - length, j + 1 - length, length};
        }
      }
      for (size_t index : previously_written) previous_run_[index] = 0;
      std::swap(run_ending_at_, previous_run_);
      std::swap(written, previously_written);
      written.clear();
    }
    for (size_t index : previously_written) previous_run_[index] = 0;
    while (best.a_begin > span.a_begin && best.b_begin > span.b_begin && a_[best.a_begin - 1] == b_[best.b_begin - 1]) {
      --best.a_begin;
      --best.b_begin;
      ++best.size;
    }
    while (best.a_begin + best.size < span.a_end && best.b_begin + best.size < span.b_end &&
           a_[best.a_begin + best.size] == b_[best.b_begin + best.size]) {
      ++best.size;
    }
    return best;
  }

  const std::u32string& a_;
  const std::u32string& b_;
  std::unordered_map<char32_t, std::vector<size_t>> positions_in_b_;  // ascending
  std::vector<size_t> run_ending_at_, previous_run_;
};

}  // namespace

size_t sequence_matcher_matches(const std::u32string& a, const std::u32string& b) {
  return Matcher(a, b).matching_characters();
}

double sequence_matcher_ratio(const std::u32string& a, const std::u32string& b) {
  const size_t length = a.size() + b.size();
  if (length == 0) return 1.0;
  return 2.0 * static_cast<double>(sequence_matcher_matches(a, b)) / static_cast<double>(length);
}

}  // namespace kvc
