#pragma once
// Byte-level BPE (GPT-2, Llama 3, Qwen 2 families): added tokens are cut out first, the rest goes
// through the pre-tokenizer, each piece's bytes are mapped to the byte alphabet and merged by rank.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer_backend.h"

namespace kvc {

struct AddedToken {
  int id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // swallows whitespace before it
  bool rstrip = false;       // swallows whitespace after it
  bool single_word = false;  // only matches outside words
};

// Everything a tokenizer file says, already in kvc's terms; sources: tokenizer.json and GGUF metadata.
struct BpeSpec {
  std::string source;        // the file, for error messages
  std::string merges_field;  // how the file names its merges ("model.merges", "tokenizer.ggml.merges")
  std::vector<std::pair<std::string, int>> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<AddedToken> added_tokens;
  std::vector<PreTokenizerStep> pre_tokenizer;
  bool ignore_merges = false;               // a piece that is itself in the vocabulary is one token
  bool nfc = false;                         // the normalizer composes text to NFC before pre-tokenizing
  std::vector<int> prefix_ids, suffix_ids;  // the post-processor's ids around a text
  std::optional<int> bos_id;
  std::vector<int> eos_ids;
};

// Throws kvc::Error naming `spec.source` and the field at fault (e.g. a merge of unknown tokens).
std::unique_ptr<TokenizerBackend> make_bpe_tokenizer(BpeSpec spec);

}  // namespace kvc
