#include "metrics/python_unicode.h"

#include <algorithm>

#include "metrics/python_unicode_tables.h"

namespace kvc::python_unicode {

namespace {

bool in_table(Table<CodeRange> table, char32_t c) {
  const CodeRange* it =
      std::upper_bound(table.begin(), table.end(), c, [](char32_t x, const CodeRange& r) { return x < r.first; });
  return it != table.begin() && c <= (it - 1)->last;
}

char32_t lower_one(char32_t c) {
  const Table<LowerRun> runs = lower_runs();
  const LowerRun* it =
      std::upper_bound(runs.begin(), runs.end(), c, [](char32_t x, const LowerRun& r) { return x < r.first; });
  if (it == runs.begin()) return c;
  const LowerRun& run = *(it - 1);
  if (c > run.last || (c - run.first) % run.stride != 0) return c;
  return static_cast<char32_t>(static_cast<int64_t>(c) + run.delta);
}

constexpr char32_t kCapitalSigma = 0x3A3, kSmallSigma = 0x3C3, kFinalSigma = 0x3C2;
constexpr char32_t kCapitalIWithDot = 0x130, kCombiningDotAbove = 0x307;

// CPython's handle_capital_sigma: \p{cased}\p{case-ignorable}* Σ !(\p{case-ignorable}*\p{cased}).
bool is_final_sigma(const std::u32string& text, size_t at) {
  size_t before = at;
  while (before > 0 && in_table(case_ignorable(), text[before - 1])) --before;
  if (before == 0 || !in_table(cased_not_ignorable(), text[before - 1])) return false;
  size_t after = at + 1;
  while (after < text.size() && in_table(case_ignorable(), text[after])) ++after;
  return after == text.size() || !in_table(cased_not_ignorable(), text[after]);
}

}  // namespace

bool is_space(char32_t c) { return in_table(spaces(), c); }
bool is_word_char(char32_t c) { return in_table(word_chars(), c); }
bool is_decimal(char32_t c) { return in_table(decimal_digits(), c); }

std::u32string lower(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char32_t c = text[i];
    if (c == kCapitalSigma) {
      out.push_back(is_final_sigma(text, i) ? kFinalSigma : kSmallSigma);
    } else if (c == kCapitalIWithDot) {
      out += {U'i', kCombiningDotAbove};
    } else {
      out.push_back(lower_one(c));
    }
  }
  return out;
}

}  // namespace kvc::python_unicode
