#include "tokenizer/spm_from_gguf.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>
#include <unordered_map>

#include "util/error.h"
#include "util/utf8.h"

namespace kvc {
namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

const std::string kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

struct Symbol {
  int prev, next;
  size_t start, length;
};

struct Bigram {
  int left, right;
  float score;
  size_t length;
  // Highest score first; among equals, the leftmost pair.
  bool operator<(const Bigram& other) const {
    return score < other.score || (score == other.score && left > other.left);
  }
};

class SpmGgufTokenizer : public TokenizerBackend {
 public:
  SpmGgufTokenizer(std::string source, std::vector<std::string> tokens, std::vector<float> scores,
                   std::vector<int64_t> types)
      : source_(std::move(source)), tokens_(std::move(tokens)), scores_(std::move(scores)), types_(std::move(types)) {
    ids_.reserve(tokens_.size());
    for (size_t id = 0; id < tokens_.size(); ++id) {
      ids_.emplace(tokens_[id], static_cast<int>(id));
      if (type(static_cast<int>(id)) == kUserDefined) user_defined_.push_back(static_cast<int>(id));
    }
    // llama.cpp splits the text at longer user-defined tokens first.
    std::stable_sort(user_defined_.begin(), user_defined_.end(),
                     [&](int a, int b) { return tokens_[a].size() > tokens_[b].size(); });
    for (int byte = 0; byte < 256; ++byte) {
      const auto it = ids_.find(fmt::format("<0x{:02X}>", byte));
      byte_ids_[byte] = it == ids_.end() ? -1 : it->second;
    }
  }

  std::vector<int> encode(const std::string& text) const override {
    // Fragments: (text, -1) still to encode, or ("", id) a user-defined token matched whole.
    std::vector<std::pair<std::string, int>> fragments{{text, -1}};
    for (int id : user_defined_) {
      const std::string& needle = tokens_[static_cast<size_t>(id)];
      if (needle.empty()) continue;
      std::vector<std::pair<std::string, int>> next;
      for (auto& [raw, matched] : fragments) {
        if (matched >= 0) {
          next.emplace_back(std::string(), matched);
          continue;
        }
        size_t from = 0, at;
        while ((at = raw.find(needle, from)) != std::string::npos) {
          if (at > from) next.emplace_back(raw.substr(from, at - from), -1);
          next.emplace_back(std::string(), id);
          from = at + needle.size();
        }
        if (from < raw.size()) next.emplace_back(raw.substr(from), -1);
      }
      fragments = std::move(next);
    }
    std::vector<int> out;
    for (const auto& [raw, matched] : fragments) {
      if (matched >= 0) {
        out.push_back(matched);
      } else {
        encode_fragment(escape_spaces(raw), out);
      }
    }
    return out;
  }

  std::string decode(const std::vector<int>& ids) const override { return utf8_lossy(decode_bytes(ids)); }

  std::string decode_bytes(const std::vector<int>& ids) const override {
    std::string out;
    for (int id : ids) {
      if (id < 0 || id >= vocab_size()) continue;
      const int64_t t = type(id);
      if (t == kControl) continue;
      const std::string& piece = tokens_[static_cast<size_t>(id)];
      if (t == kByte && piece.size() == 6) {
        out.push_back(static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
        continue;
      }
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
          out.push_back(' ');
          i += kSpace.size();
        } else {
          out.push_back(piece[i++]);
        }
      }
    }
    return out;
  }

  std::string piece(int id) const override {
    KVC_CHECK(id >= 0 && id < vocab_size(), "token id {} is outside the vocabulary of '{}' ({} tokens)", id, source_,
              vocab_size());
    return tokens_[static_cast<size_t>(id)];
  }
  std::optional<int> piece_to_id(const std::string& piece) const override {
    const auto it = ids_.find(piece);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  int vocab_size() const override { return static_cast<int>(tokens_.size()); }
  std::optional<int> bos_id() const override { return bos_; }
  std::vector<int> eos_ids() const override { return eos_; }
  std::vector<int> prefix_ids() const override { return prefix_; }
  std::vector<int> suffix_ids() const override { return suffix_; }
  std::vector<int> control_ids() const override {
    std::vector<int> ids;
    for (size_t id = 0; id < tokens_.size(); ++id)
      if (type(static_cast<int>(id)) == kControl) ids.push_back(static_cast<int>(id));
    return ids;
  }
  std::string kind() const override { return "sentencepiece"; }
  std::string source() const override { return source_; }

  std::optional<int> bos_;
  std::vector<int> eos_, prefix_, suffix_;

 private:
  int64_t type(int id) const { return types_.empty() ? kNormal : types_[static_cast<size_t>(id)]; }

  static std::string escape_spaces(const std::string& text) {
    std::string out;
    out.reserve(text.size() + text.size() / 2);
    for (char ch : text) {
      if (ch == ' ') {
        out += kSpace;
      } else {
        out.push_back(ch);
      }
    }
    return out;
  }

  int token_id(const std::string& text) const {
    const auto it = ids_.find(text);
    return it == ids_.end() ? -1 : it->second;
  }

  void encode_fragment(const std::string& text, std::vector<int>& out) const {
    if (text.empty()) return;
    std::vector<Symbol> symbols;
    for (size_t pos = 0; pos < text.size();) {
      // One symbol per UTF-8 character (a stray byte on its own).
      const size_t length = std::max<size_t>(1, std::min(utf8_sequence_length(text, pos), text.size() - pos));
      const int index = static_cast<int>(symbols.size());
      symbols.push_back({index - 1, index + 1, pos, length});
      pos += length;
    }
    symbols.back().next = -1;

    std::priority_queue<Bigram> queue;
    std::unordered_map<std::string, std::pair<int, int>> merged_from;
    const auto try_add = [&](int left, int right) {
      if (left < 0 || right < 0) return;
      const std::string piece =
          text.substr(symbols[static_cast<size_t>(left)].start,
                      symbols[static_cast<size_t>(left)].length + symbols[static_cast<size_t>(right)].length);
      const int id = token_id(piece);
      if (id < 0) return;
      queue.push({left, right, scores_[static_cast<size_t>(id)], piece.size()});
      merged_from[piece] = {left, right};
    };
    for (int i = 1; i < static_cast<int>(symbols.size()); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram bigram = queue.top();
      queue.pop();
      Symbol& left = symbols[static_cast<size_t>(bigram.left)];
      Symbol& right = symbols[static_cast<size_t>(bigram.right)];
      // Stale: one side was merged away since this pair was queued.
      if (left.length == 0 || right.length == 0 || left.length + right.length != bigram.length) continue;
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = bigram.left;
      try_add(left.prev, bigram.left);
      try_add(bigram.left, left.next);
    }

    for (int i = 0; i >= 0 && i < static_cast<int>(symbols.size()); i = symbols[static_cast<size_t>(i)].next) {
      resegment(text, symbols, merged_from, symbols[static_cast<size_t>(i)], out);
    }
  }

  // A symbol that is a token is output; one built from a merge whose result is not a usable token is
  // split back into its halves; what is left is spelled in byte tokens.
  void resegment(const std::string& text, const std::vector<Symbol>& symbols,
                 const std::unordered_map<std::string, std::pair<int, int>>& merged_from, const Symbol& symbol,
                 std::vector<int>& out) const {
    const std::string piece = text.substr(symbol.start, symbol.length);
    if (const int id = token_id(piece); id >= 0) {
      out.push_back(id);
      return;
    }
    const auto it = merged_from.find(piece);
    if (it == merged_from.end()) {
      for (unsigned char byte : piece) {
        KVC_CHECK(byte_ids_[byte] >= 0, "'{}': text needs byte token <0x{:02X}>, which the vocabulary lacks", source_,
                  byte);
        out.push_back(byte_ids_[byte]);
      }
      return;
    }
    resegment(text, symbols, merged_from, symbols[static_cast<size_t>(it->second.first)], out);
    resegment(text, symbols, merged_from, symbols[static_cast<size_t>(it->second.second)], out);
  }

  std::string source_;
  std::vector<std::string> tokens_;
  std::vector<float> scores_;
  std::vector<int64_t> types_;
  std::unordered_map<std::string, int> ids_;
  std::vector<int> user_defined_;
  int byte_ids_[256];
};

}  // namespace

std::unique_ptr<TokenizerBackend> load_spm_from_gguf(const gguf::GgufFile& file) {
  const std::string& path = file.path();
  KVC_CHECK(file.has("tokenizer.ggml.tokens"),
            "'{}': metadata key 'tokenizer.ggml.tokens' is missing (no tokenizer "
            "in this GGUF)",
            path);
  std::vector<std::string> tokens = file.get_string_array("tokenizer.ggml.tokens");
  KVC_CHECK(file.has("tokenizer.ggml.scores"),
            "'{}': metadata key 'tokenizer.ggml.scores' is missing (a SentencePiece "
            "vocabulary needs its scores)",
            path);
  const auto& real_scores = file.get_float_array("tokenizer.ggml.scores");
  KVC_CHECK(real_scores.size() == tokens.size(), "'{}': tokenizer.ggml.scores has {} entries for {} tokens", path,
            real_scores.size(), tokens.size());
  std::vector<float> scores(real_scores.begin(), real_scores.end());
  std::vector<int64_t> types;
  if (file.has("tokenizer.ggml.token_type")) {
    types = file.get_int_array("tokenizer.ggml.token_type");
    KVC_CHECK(types.size() == tokens.size(), "'{}': tokenizer.ggml.token_type has {} entries for {} tokens", path,
              types.size(), tokens.size());
  }
  KVC_CHECK(!file.has("tokenizer.ggml.add_space_prefix") || !file.get_bool("tokenizer.ggml.add_space_prefix"),
            "'{}': tokenizer.ggml.add_space_prefix = true is not supported yet", path);
  const size_t n = tokens.size();
  auto tokenizer = std::make_unique<SpmGgufTokenizer>(path, std::move(tokens), std::move(scores), std::move(types));
  const auto token_id = [&](const char* key) -> std::optional<int> {
    if (!file.has(key)) return std::nullopt;
    const uint32_t id = file.get_u32(key);
    KVC_CHECK(id < n, "'{}': {} = {} is outside the {} tokens", path, key, id, n);
    return static_cast<int>(id);
  };
  tokenizer->bos_ = token_id("tokenizer.ggml.bos_token_id");
  if (const auto eos = token_id("tokenizer.ggml.eos_token_id")) tokenizer->eos_.push_back(*eos);
  if (const auto eot = token_id("tokenizer.ggml.eot_token_id"))
    if (tokenizer->eos_.empty() || tokenizer->eos_[0] != *eot) tokenizer->eos_.push_back(*eot);
  // llama.cpp adds BOS for SentencePiece vocabularies unless the file says otherwise.
  const bool add_bos = !file.has("tokenizer.ggml.add_bos_token") || file.get_bool("tokenizer.ggml.add_bos_token");
  if (add_bos) {
    KVC_CHECK(tokenizer->bos_.has_value(),
              "'{}': tokenizer.ggml.add_bos_token is true but "
              "tokenizer.ggml.bos_token_id is missing",
              path);
    tokenizer->prefix_.push_back(*tokenizer->bos_);
  }
  if (file.has("tokenizer.ggml.add_eos_token") && file.get_bool("tokenizer.ggml.add_eos_token") &&
      !tokenizer->eos_.empty())
    tokenizer->suffix_.push_back(tokenizer->eos_[0]);
  return tokenizer;
}

}  // namespace kvc
