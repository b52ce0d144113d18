#pragma once
// What every tokenizer implementation offers; kvc::Tokenizer (tokenizer.h) holds one of these.
#include <optional>
#include <string>
#include <vector>

namespace kvc {

class TokenizerBackend {
 public:
  virtual ~TokenizerBackend() = default;

  // The text's tokens without BOS/EOS: callers add the model's BOS themselves.
  virtual std::vector<int> encode(const std::string& text) const = 0;
  // Text for the ids as the reference library prints it (invalid UTF-8 replaced by U+FFFD).
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The bytes the ids stand for, incomplete UTF-8 left as it is (streaming waits for the rest).
  virtual std::string decode_bytes(const std::vector<int>& ids) const { return decode(ids); }
  // The vocabulary's spelling of one token ("▁the" for SentencePiece, "Ġthe" for byte-level BPE).
  virtual std::string piece(int id) const = 0;
  virtual std::optional<int> piece_to_id(const std::string& piece) const = 0;
  virtual int vocab_size() const = 0;

  // Special ids as the tokenizer file declares them; nullopt/empty when it does not.
  virtual std::optional<int> bos_id() const = 0;
  virtual std::vector<int> eos_ids() const = 0;
  // Ids the tokenizer's own rules put around a text ("add_special_tokens"): BOS for Llama 3, none for Qwen 2.
  virtual std::vector<int> prefix_ids() const = 0;
  virtual std::vector<int> suffix_ids() const { return {}; }
  // Control tokens that encode() spells out rather than takes whole (SentencePiece's <bos>, Gemma's
  // <start_of_turn>); Tokenizer::encode_with_specials takes them whole, as a rendered chat writes them.
  // Byte-level BPE matches its special tokens in encode() already.
  virtual std::vector<int> control_ids() const { return {}; }

  virtual std::string kind() const = 0;    // "sentencepiece" or "bpe"
  virtual std::string source() const = 0;  // the file it came from
};

}  // namespace kvc
