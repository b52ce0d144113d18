#include "tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>

#include "tokenizer/byte_unicode.h"
#include "tokenizer/normalizer.h"
#include "util/error.h"
#include "util/utf8.h"

namespace kvc {
namespace {

// Ids beyond this are a corrupt file, not a vocabulary (the largest real ones hold ~260K tokens).
constexpr int kMaxTokenId = 1 << 24;
// Distinct pieces remembered between calls; text repeats its words, so most pieces hit the cache.
constexpr size_t kCacheLimit = 200'000;
// Pieces up to this many bytes merge by rescanning (fastest for words); longer ones use a heap.
constexpr size_t kShortPiece = 48;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
bool is_word_byte(char c) {
  const auto b = static_cast<uint8_t>(c);
  return b >= 0x80 || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class BpeTokenizer final : public TokenizerBackend {
 public:
  explicit BpeTokenizer(BpeSpec spec)
      : source_(spec.source),
        pre_(std::move(spec.pre_tokenizer)),
        ignore_merges_(spec.ignore_merges),
        nfc_(spec.nfc),
        prefix_ids_(std::move(spec.prefix_ids)),
        suffix_ids_(std::move(spec.suffix_ids)),
        bos_id_(spec.bos_id),
        eos_ids_(std::move(spec.eos_ids)) {
    for (const auto& [token, id] : spec.vocab) add_token(token, id, false, "vocabulary");
    for (const auto& added : spec.added_tokens) add_token(added.content, added.id, true, "added token");
    build_merges(spec);
    build_added_matcher(std::move(spec.added_tokens));
    byte_ids_.fill(-1);
    for (int b = 0; b < 256; ++b) {
      const auto it = token_to_id_.find(byte_to_symbol(static_cast<uint8_t>(b)));
      if (it != token_to_id_.end()) byte_ids_[b] = it->second;
    }
    for (int id : prefix_ids_) check_id(id, "post-processor");
    for (int id : suffix_ids_) check_id(id, "post-processor");
  }

  std::vector<int> encode(const std::string& text) const override {
    const size_t bad = utf8_first_invalid(text);
    KVC_CHECK(bad == text.size(), "the text is not valid UTF-8 (byte {} of {})", bad, text.size());
    std::vector<int> ids;
    size_t segment_start = 0, pos = 0;
    while (pos < text.size()) {
      size_t begin = 0, end = 0;
      const AddedToken* added = match_added(text, pos, segment_start, &begin, &end);
      if (added == nullptr) {
        ++pos;
        continue;
      }
      encode_segment(std::string_view(text).substr(segment_start, begin - segment_start), ids);
      ids.push_back(added->id);
      pos = segment_start = end;
    }
    encode_segment(std::string_view(text).substr(segment_start), ids);
    return ids;
  }

  std::string decode_bytes(const std::vector<int>& ids) const override {
    std::string bytes;
    for (int id : ids) {
      check_id(id, "decode");
      const std::string& token = id_to_token_[static_cast<size_t>(id)];
      // As the reference ByteLevel decoder: a token outside the byte alphabet (an added token such as
      // "<|im_start|>" with a space in it) passes through as its own UTF-8.
      if (!symbols_to_bytes(token, bytes)) bytes += token;
    }
    return bytes;
  }

  std::string decode(const std::vector<int>& ids) const override { return utf8_lossy(decode_bytes(ids)); }

  std::string piece(int id) const override {
    check_id(id, "piece");
    return id_to_token_[static_cast<size_t>(id)];
  }

  std::optional<int> piece_to_id(const std::string& piece) const override {
    const auto it = token_to_id_.find(piece);
    if (it == token_to_id_.end()) return std::nullopt;
    return it->second;
  }

  int vocab_size() const override { return static_cast<int>(id_to_token_.size()); }
  std::optional<int> bos_id() const override { return bos_id_; }
  std::vector<int> eos_ids() const override { return eos_ids_; }
  std::vector<int> prefix_ids() const override { return prefix_ids_; }
  std::vector<int> suffix_ids() const override { return suffix_ids_; }
  std::string kind() const override { return "bpe"; }
  std::string source() const override { return source_; }

 private:
  void add_token(const std::string& token, int id, bool added, const char* what) {
    KVC_CHECK(id >= 0 && id < kMaxTokenId, "'{}': {} '{}' has id {} (outside 0..{})", source_, what, token, id,
              kMaxTokenId - 1);
    if (static_cast<size_t>(id) >= id_to_token_.size()) {
      id_to_token_.resize(static_cast<size_t>(id) + 1);
      present_.resize(static_cast<size_t>(id) + 1, false);
    }
    id_to_token_[static_cast<size_t>(id)] = token;
    present_[static_cast<size_t>(id)] = true;
    if (added || token_to_id_.count(token) == 0) token_to_id_[token] = id;
  }

  void check_id(int id, const char* what) const {
    KVC_CHECK(id >= 0 && static_cast<size_t>(id) < id_to_token_.size() && present_[static_cast<size_t>(id)],
              "token id {} is outside the vocabulary of '{}' (size {})", id, source_, id_to_token_.size());
  }

  int vocab_id(const std::string& token, size_t index, const BpeSpec& spec, const char* role) const {
    const auto it = token_to_id_.find(token);
    KVC_CHECK(it != token_to_id_.end(), "'{}': {}[{}] {} '{}' which is not in the vocabulary", source_,
              spec.merges_field, index, role, token);
    return it->second;
  }

  void build_merges(const BpeSpec& spec) {
    merges_.reserve(spec.merges.size());
    for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
      const auto& [left, right] = spec.merges[rank];
      const int left_id = vocab_id(left, rank, spec, "names");
      const int right_id = vocab_id(right, rank, spec, "names");
      const int merged_id = vocab_id(left + right, rank, spec, "merges into");
      // A repeated pair takes its later rank, as the reference implementation's map does.
      merges_[pair_key(left_id, right_id)] = {static_cast<int>(rank), merged_id};
    }
  }

  void build_added_matcher(std::vector<AddedToken> added) {
    added_ = std::move(added);
    for (size_t i = 0; i < added_.size(); ++i) {
      const std::string& content = added_[i].content;
      if (content.empty()) continue;
      by_first_byte_[static_cast<uint8_t>(content[0])].push_back(i);
    }
    // Longest first: the reference matcher takes the leftmost-longest added token.
    for (auto& bucket : by_first_byte_) {
      std::stable_sort(bucket.begin(), bucket.end(),
                       [&](size_t a, size_t b) { return added_[a].content.size() > added_[b].content.size(); });
    }
  }

  // The added token that starts at `pos`, with the span it takes once lstrip/rstrip swallow whitespace.
  const AddedToken* match_added(const std::string& text, size_t pos, size_t floor, size_t* begin, size_t* end) const {
    for (size_t index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
      const AddedToken& token = added_[index];
      if (text.compare(pos, token.content.size(), token.content) != 0) continue;
      size_t b = pos, e = pos + token.content.size();
      if (token.single_word && ((b > 0 && is_word_byte(text[b - 1])) || (e < text.size() && is_word_byte(text[e]))))
        continue;
      if (token.lstrip)
        while (b > floor && is_space(text[b - 1])) --b;
      if (token.rstrip)
        while (e < text.size() && is_space(text[e])) ++e;
      *begin = b;
      *end = e;
      return &token;
    }
    return nullptr;
  }

  void encode_segment(std::string_view segment, std::vector<int>& ids) const {
    if (segment.empty()) return;
    std::vector<std::string> pieces;
    // Added tokens were cut out first: only the text between them is normalized.
    if (nfc_) pre_.split(nfc(segment), pieces);
    else pre_.split(segment, pieces);
    for (const std::string& piece : pieces) encode_piece(piece, ids);
  }

  void encode_piece(const std::string& piece, std::vector<int>& ids) const {
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      const auto it = cache_.find(piece);
      if (it != cache_.end()) {
        ids.insert(ids.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int> symbols = merge(piece);
    ids.insert(ids.end(), symbols.begin(), symbols.end());
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheLimit) cache_.clear();
    cache_.emplace(piece, std::move(symbols));
  }

  std::vector<int> merge(const std::string& piece) const {
    if (ignore_merges_) {
      std::string mapped;
      for (char c : piece) mapped += byte_to_symbol(static_cast<uint8_t>(c));
      const auto it = token_to_id_.find(mapped);
      if (it != token_to_id_.end()) return {it->second};
    }
    std::vector<int> symbols;
    symbols.reserve(piece.size());
    // A byte missing from the vocabulary is dropped, as the reference does without an unk token.
    for (char c : piece) {
      const int id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) symbols.push_back(id);
    }
    // Merge the lowest-ranked pair (leftmost on ties) until none is left: the reference's order.
    if (symbols.size() > kShortPiece) return merge_long(std::move(symbols));
    while (symbols.size() > 1) {
      int best_rank = INT_MAX, best_id = -1;
      size_t best_at = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = merges_.find(pair_key(symbols[i], symbols[i + 1]));
        if (it != merges_.end() && it->second.first < best_rank) {
          best_rank = it->second.first;
          best_id = it->second.second;
          best_at = i;
        }
      }
      if (best_id < 0) break;
      symbols[best_at] = best_id;
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
    }
    return symbols;
  }

  // The same order with a heap over a linked list: O(n log n), for long pieces (a run of spaces, a
  // base64 blob) where rescanning every pair after each merge would be quadratic.
  std::vector<int> merge_long(std::vector<int> ids) const {
    struct Candidate {
      int rank;
      size_t at;
      int merged;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : at > o.at; }
    };
    const size_t n = ids.size();
    std::vector<size_t> next(n), prev(n);
    std::vector<bool> alive(n, true);
    for (size_t i = 0; i < n; ++i) {
      next[i] = i + 1;
      prev[i] = i == 0 ? SIZE_MAX : i - 1;
    }
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
    const auto consider = [&](size_t left) {
      if (left == SIZE_MAX || next[left] >= n) return;
      const auto it = merges_.find(pair_key(ids[left], ids[next[left]]));
      if (it != merges_.end()) heap.push({it->second.first, left, it->second.second});
    };
    for (size_t i = 0; i + 1 < n; ++i) consider(i);
    while (!heap.empty()) {
      const Candidate c = heap.top();
      heap.pop();
      if (!alive[c.at] || next[c.at] >= n) continue;
      // Stale entries: the pair at `at` changed since this one was pushed.
      const auto it = merges_.find(pair_key(ids[c.at], ids[next[c.at]]));
      if (it == merges_.end() || it->second.first != c.rank || it->second.second != c.merged) continue;
      const size_t gone = next[c.at];
      ids[c.at] = c.merged;
      alive[gone] = false;
      next[c.at] = next[gone];
      if (next[gone] < n) prev[next[gone]] = c.at;
      consider(prev[c.at]);
      consider(c.at);
    }
    std::vector<int> out;
    for (size_t i = 0; i < n; i = next[i]) out.push_back(ids[i]);
    return out;
  }

  std::string source_;
  PreTokenizer pre_;
  bool ignore_merges_;
  bool nfc_;
  std::vector<int> prefix_ids_, suffix_ids_;
  std::optional<int> bos_id_;
  std::vector<int> eos_ids_;
  std::unordered_map<std::string, int> token_to_id_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> present_;
  std::unordered_map<uint64_t, std::pair<int, int>> merges_;  // pair -> (rank, merged id)
  std::array<int, 256> byte_ids_{};
  std::vector<AddedToken> added_;
  std::array<std::vector<size_t>, 256> by_first_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace

std::unique_ptr<TokenizerBackend> make_bpe_tokenizer(BpeSpec spec) {
  return std::make_unique<BpeTokenizer>(std::move(spec));
}

}  // namespace kvc
