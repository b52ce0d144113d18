#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "util/error.h"

namespace kvc {

RegexSplitter::RegexSplitter(const std::string& pattern, bool literal, const std::string& where) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options, &error_code,
                                   &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error_code, message, sizeof message);
    fail("{}: the regex cannot be compiled at offset {}: {}", where, error_offset,
         reinterpret_cast<const char*>(message));
  }
  jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = code;
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

namespace {

// Per-thread matching state shared by every pattern: the whole-match offsets and a JIT stack big
// enough for long runs of one class (a megabyte of spaces is one \s+ match).
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 64 * 1024 * 1024, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  MatchState() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchState() {
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(stack);
    pcre2_match_data_free(data);
  }
};

}  // namespace

void RegexSplitter::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const {
  thread_local MatchState state;
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t start = 0;
  while (start < text.size()) {
    // The caller checked the UTF-8 once for the whole text.
    const int rc =
        jit_ ? pcre2_jit_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context)
             : pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.data, state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      fail("the pre-tokenizer's regex failed at byte {} of the text: {}", start,
           reinterpret_cast<const char*>(message));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.data);
    size_t begin = ovector[0], end = ovector[1];
    if (end == begin) {  // empty match: step over one whole character
      ++end;
      while (end < text.size() && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) ++end;
      start = end;
      continue;
    }
    matches.emplace_back(begin, end);
    start = end;
  }
}

PreTokenizer::PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {
  for (const auto& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::ByteLevel && step.use_regex && !gpt2_) {
      gpt2_ = std::make_shared<RegexSplitter>(kGpt2Pattern, false, "ByteLevel pre-tokenizer");
    }
  }
}

namespace {

// Splits every piece around the matches of `regex`, keeping or dropping the matches.
void split_pieces(const RegexSplitter& regex, SplitBehavior behavior, bool invert, std::vector<std::string>& pieces) {
  std::vector<std::string> out;
  std::vector<std::pair<size_t, size_t>> matches;
  for (const std::string& piece : pieces) {
    matches.clear();
    regex.find_all(piece, matches);
    size_t last = 0;
    // invert swaps what is kept: the matches become the gaps and the gaps the matches.
    const auto emit = [&](size_t begin, size_t end, bool is_match) {
      if (begin >= end) return;
      if (behavior == SplitBehavior::Removed && is_match != invert) return;
      out.emplace_back(piece, begin, end - begin);
    };
    for (const auto& [begin, end] : matches) {
      emit(last, begin, false);
      emit(begin, end, true);
      last = end;
    }
    emit(last, piece.size(), false);
  }
  pieces.swap(out);
}

}  // namespace

void PreTokenizer::split(std::string_view text, std::vector<std::string>& pieces) const {
  std::vector<std::string> current{std::string(text)};
  for (const auto& step : steps_) {
    if (step.kind == PreTokenizerStep::Kind::Split) {
      split_pieces(*step.regex, step.behavior, step.invert, current);
      continue;
    }
    if (step.add_prefix_space) {
      for (auto& piece : current)
        if (piece.empty() || piece[0] != ' ') piece.insert(piece.begin(), ' ');
    }
    if (step.use_regex) split_pieces(*gpt2_, SplitBehavior::Isolated, false, current);
  }
  for (auto& piece : current) pieces.push_back(std::move(piece));
}

}  // namespace kvc
