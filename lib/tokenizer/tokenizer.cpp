#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>

#include "io/gguf_reader.h"

#include "tokenizer/bpe_from_gguf.h"
#include "tokenizer/sentencepiece_backend.h"
#include "tokenizer/spm_from_gguf.h"
#include "tokenizer/tokenizer_json.h"
#include "util/error.h"
#include "util/files.h"
#include "util/utf8.h"

namespace kvc {
namespace {

std::unique_ptr<TokenizerBackend> load_file(const std::string& path) {
  if (gguf::is_gguf_file(path)) {
    const auto file = gguf::GgufFile::open_metadata(path);
    KVC_CHECK(file->has("tokenizer.ggml.model"),
              "'{}': metadata key 'tokenizer.ggml.model' is missing (no tokenizer "
              "in this GGUF)",
              path);
    if (file->get_string("tokenizer.ggml.model") == "llama") return load_spm_from_gguf(*file);
    return load_bpe_from_gguf(path);
  }
  if (std::filesystem::path(path).extension() == ".json") return load_tokenizer_json(path);
  return load_sentencepiece(path);
}

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<TokenizerBackend> backend)
    : backend_(std::move(backend)), control_spellings_(256) {
  // Longest first, so that "<start_of_turn>" wins over a shorter control token that is its prefix.
  for (int id : backend_->control_ids()) {
    std::string spelled = backend_->piece(id);
    if (!spelled.empty())
      control_spellings_[static_cast<unsigned char>(spelled[0])].emplace_back(std::move(spelled), id);
  }
  for (auto& list : control_spellings_) {
    std::stable_sort(list.begin(), list.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
  KVC_CHECK(file_exists(path), "tokenizer not found: '{}'", path);
  if (!is_directory(path)) return Tokenizer(load_file(path));
  // transformers prefers the fast tokenizer (tokenizer.json) when a folder holds both.
  const std::string json_path = path + "/tokenizer.json", model_path = path + "/tokenizer.model";
  const bool has_model = file_exists(model_path);
  // A Llama-2-era tokenizer.json is SentencePiece-style BPE; its tokenizer.model is the faithful one.
  if (file_exists(json_path) && (!has_model || tokenizer_json_is_byte_level(json_path)))
    return Tokenizer(load_tokenizer_json(json_path));
  if (has_model) return Tokenizer(load_sentencepiece(model_path));
  fail("'{}' has no tokenizer.json or tokenizer.model; copy the model's tokenizer next to config.json", path);
}

std::vector<int> Tokenizer::prompt_prefix(BosChoice bos) const {
  std::vector<int> prefix = backend_->prefix_ids();
  if (bos == BosChoice::FromFile) return prefix;
  const std::optional<int> bos_id = backend_->bos_id();
  const bool has_bos = bos_id && std::find(prefix.begin(), prefix.end(), *bos_id) != prefix.end();
  if (bos == BosChoice::Add && !has_bos) {
    KVC_CHECK(bos_id.has_value(), "--bos: the tokenizer '{}' declares no BOS token", source());
    prefix.insert(prefix.begin(), *bos_id);
  } else if (bos == BosChoice::Omit && has_bos) {
    prefix.erase(std::remove(prefix.begin(), prefix.end(), *bos_id), prefix.end());
  }
  return prefix;
}

std::optional<int> Tokenizer::prompt_bos(BosChoice bos) const {
  const std::vector<int> prefix = prompt_prefix(bos);
  const std::optional<int> bos_id = backend_->bos_id();
  if (bos_id && !prefix.empty() && prefix.front() == *bos_id) return bos_id;
  return std::nullopt;
}

std::vector<int> Tokenizer::encode_prompt(const std::string& text, BosChoice bos) const {
  std::vector<int> ids = prompt_prefix(bos);
  const std::vector<int> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  for (int id : backend_->suffix_ids()) ids.push_back(id);
  return ids;
}

std::vector<int> Tokenizer::encode_with_specials(const std::string& text) const {
  std::vector<int> ids;
  size_t plain_start = 0;
  const auto flush = [&](size_t end) {
    if (end > plain_start) {
      const std::vector<int> part = encode(text.substr(plain_start, end - plain_start));
      ids.insert(ids.end(), part.begin(), part.end());
    }
  };
  for (size_t i = 0; i < text.size();) {
    const auto& candidates = control_spellings_[static_cast<unsigned char>(text[i])];
    const auto match = std::find_if(candidates.begin(), candidates.end(),
                                    [&](const auto& c) { return text.compare(i, c.first.size(), c.first) == 0; });
    if (match == candidates.end()) {
      ++i;
      continue;
    }
    flush(i);
    ids.push_back(match->second);
    i += match->first.size();
    plain_start = i;
  }
  flush(text.size());
  return ids;
}

std::vector<int> Tokenizer::with_special_ids(const std::vector<int>& ids) const {
  std::vector<int> out = backend_->prefix_ids();
  out.insert(out.end(), ids.begin(), ids.end());
  for (int id : backend_->suffix_ids()) out.push_back(id);
  return out;
}

void StreamDecoder::prime(const std::vector<int>& shown_ids) {
  constexpr size_t kWindow = 8;
  const size_t start = shown_ids.size() > kWindow ? shown_ids.size() - kWindow : 0;
  context_.assign(shown_ids.begin() + static_cast<std::ptrdiff_t>(start), shown_ids.end());
  pending_.clear();
}

std::string StreamDecoder::push(int id) {
  // Decode a short window of recent ids with and without the new one and emit the difference: the
  // window keeps SentencePiece's leading-space rule and byte-fallback pieces right, in O(1) per token.
  constexpr size_t kWindow = 8;
  // A UTF-8 character spans at most 4 bytes, so at most 4 byte tokens: past that the bytes are invalid.
  constexpr size_t kMaxPending = 4;
  pending_.push_back(id);
  std::vector<int> window(context_.begin(), context_.end());
  const std::string before = tokenizer_.decode_bytes(window);
  window.insert(window.end(), pending_.begin(), pending_.end());
  std::string after = tokenizer_.decode_bytes(window);
  // SentencePiece shows an incomplete character as a trailing U+FFFD; byte-level BPE leaves its bytes cut.
  const bool spm_incomplete = after.size() >= 3 && after.compare(after.size() - 3, 3, "\xEF\xBF\xBD") == 0;
  if ((spm_incomplete || utf8_incomplete_tail(after) > 0) && pending_.size() < kMaxPending) return {};
  std::string fresh = after.compare(0, before.size(), before) == 0 ? after.substr(before.size()) : after;
  for (int p : pending_) context_.push_back(p);
  pending_.clear();
  while (context_.size() > kWindow) context_.erase(context_.begin());
  return utf8_valid(fresh) ? fresh : utf8_lossy(fresh);
}

}  // namespace kvc
