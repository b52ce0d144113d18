#pragma once
// kvc::Tokenizer: one value type over the tokenizer implementations (tokenizer_backend.h) —
// SentencePiece (tokenizer.model) and byte-level BPE (tokenizer.json, or a GGUF file's metadata).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/tokenizer_backend.h"

namespace kvc {

// Whether a prompt starts with BOS: as the tokenizer file says, or as --bos / --no-bos say.
enum class BosChoice { FromFile, Add, Omit };

class Tokenizer {
 public:
  // A model folder (tokenizer.json preferred over tokenizer.model, as transformers does), or one file:
  // tokenizer.json, a .gguf file, or a SentencePiece tokenizer.model. Throws kvc::Error naming the path.
  static Tokenizer load(const std::string& path);
  explicit Tokenizer(std::unique_ptr<TokenizerBackend> backend);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Without BOS/EOS (see with_special_ids).
  std::vector<int> encode(const std::string& text) const { return backend_->encode(text); }
  // The same, with the vocabulary's control tokens written out in the text ("<start_of_turn>",
  // "<|im_start|>") taken whole: how transformers tokenizes a rendered chat template.
  std::vector<int> encode_with_specials(const std::string& text) const;
  // How every prompt and evaluation stream is tokenized: the tokenizer file's rules around the text
  // (BOS where GGUF's add_bos_token, tokenizer_config.json's add_bos_token or the post-processor say so;
  // EOS likewise), as llama.cpp and transformers tokenize a prompt. `bos` (--bos / --no-bos) can
  // override the file on BOS.
  std::vector<int> encode_prompt(const std::string& text, BosChoice bos = BosChoice::FromFile) const;
  // The ids encode_prompt puts before the text.
  std::vector<int> prompt_prefix(BosChoice bos = BosChoice::FromFile) const;
  // The BOS encode_prompt starts with, or nullopt when it starts with none.
  std::optional<int> prompt_bos(BosChoice bos = BosChoice::FromFile) const;
  // The tokenizer's own BOS/EOS rules around `ids` (Hugging Face's add_special_tokens=True).
  std::vector<int> with_special_ids(const std::vector<int>& ids) const;
  std::string decode(const std::vector<int>& ids) const { return backend_->decode(ids); }
  std::string decode_bytes(const std::vector<int>& ids) const { return backend_->decode_bytes(ids); }
  std::string piece(int id) const { return backend_->piece(id); }
  std::optional<int> piece_to_id(const std::string& piece) const { return backend_->piece_to_id(piece); }
  int vocab_size() const { return backend_->vocab_size(); }
  std::optional<int> bos_id() const { return backend_->bos_id(); }
  std::vector<int> eos_ids() const { return backend_->eos_ids(); }
  std::string kind() const { return backend_->kind(); }
  std::string source() const { return backend_->source(); }

 private:
  // The control tokens' spellings by first byte, longest first (encode_with_specials).
  using SpellingsByFirstByte = std::vector<std::vector<std::pair<std::string, int>>>;

  std::unique_ptr<TokenizerBackend> backend_;
  SpellingsByFirstByte control_spellings_;
};

// Streaming detokenizer: feed ids one at a time, get the text that became final. Never emits part of a
// multi-byte UTF-8 character: it waits for the token that completes it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  // Text already shown (the prompt): without it the first piece would lose its leading space.
  void prime(const std::vector<int>& shown_ids);
  std::string push(int id);

 private:
  const Tokenizer& tokenizer_;
  std::vector<int> context_;  // recently emitted ids
  std::vector<int> pending_;  // ids whose text is not yet complete
};

}  // namespace kvc
