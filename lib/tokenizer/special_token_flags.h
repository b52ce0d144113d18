#pragma once
// tokenizer_config.json's add_bos_token / add_eos_token: transformers puts BOS before, and EOS after, a
// tokenized text as they say, whatever the tokenizer file's post-processor holds (SentencePiece files
// have none; Llama 2 sets add_bos_token, SmolLM2-style folders may clear it).
#include <optional>
#include <string>
#include <vector>

namespace kvc {

struct AddSpecialFlags {
  std::optional<bool> add_bos, add_eos;
};

// The flags in DIR/tokenizer_config.json; both unset when the file or a key is absent (or not a bool).
AddSpecialFlags read_add_special_flags(const std::string& dir);

// Puts `bos` first in `prefix` (or takes it out) and `eos` last in `suffix` (or out) where a flag is set.
// `where` names the file for the error when a flag asks for a token the tokenizer does not have.
void apply_add_special_flags(const AddSpecialFlags& flags, std::optional<int> bos, std::optional<int> eos,
                             std::vector<int>& prefix, std::vector<int>& suffix, const std::string& where);

}  // namespace kvc
