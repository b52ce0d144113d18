#pragma once
// Pre-tokenizers of byte-level BPE tokenizers: regex splits (PCRE2 with Unicode properties) and the
// ByteLevel step, in the order the tokenizer file lists them.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kvc {

// The split patterns of the common families, spelled as their tokenizer.json files spell them.
inline constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// A compiled pattern; matching is thread-safe.
class RegexSplitter {
 public:
  // Throws kvc::Error "<where>: ..." if PCRE2 rejects the pattern.
  RegexSplitter(const std::string& pattern, bool literal, const std::string& where);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  // Appends [begin, end) of every non-overlapping match, left to right. `text` must be valid UTF-8.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

 private:
  void* code_ = nullptr;  // pcre2_code_8
  bool jit_ = false;
};

// Hugging Face's SplitDelimiterBehavior, the two the byte-level families use.
enum class SplitBehavior { Isolated, Removed };

struct PreTokenizerStep {
  enum class Kind { Split, ByteLevel } kind = Kind::Split;
  // Split
  std::shared_ptr<const RegexSplitter> regex;
  SplitBehavior behavior = SplitBehavior::Isolated;
  bool invert = false;
  // ByteLevel
  bool add_prefix_space = false;
  bool use_regex = true;  // splits with kGpt2Pattern first
};

// Runs the steps over `text` and appends the resulting pieces (byte ranges of owned strings).
class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps);
  void split(std::string_view text, std::vector<std::string>& pieces) const;
  bool empty() const { return steps_.empty(); }

 private:
  std::vector<PreTokenizerStep> steps_;
  std::shared_ptr<const RegexSplitter> gpt2_;  // for ByteLevel steps with use_regex
};

}  // namespace kvc
