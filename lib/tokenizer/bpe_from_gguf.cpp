#include "tokenizer/bpe_from_gguf.h"

#include "io/gguf_reader.h"
#include "tokenizer/bpe_tokenizer.h"
#include "util/error.h"

#include <vector>

namespace kvc {
namespace {

// llama.cpp's token types (llama_token_type).
enum TokenType : int64_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };

// A split family: the regexes llama.cpp applies one after the other, each splitting the pieces the
// previous one left (matches kept as pieces of their own, as Hugging Face's "Isolated" splits).
struct SplitFamily {
  std::vector<const char*> patterns;
};

const SplitFamily kGpt2{{kGpt2Pattern}};
const SplitFamily kLlama3{{kLlama3Pattern}};
const SplitFamily kQwen2{{kQwen2Pattern}};
// Digits one by one, then GPT-2's split: Hugging Face's Digits(individual_digits) + ByteLevel.
const SplitFamily kDigitsThenGpt2{{R"(\p{N})", kGpt2Pattern}};

struct PreName {
  const char* name;
  const SplitFamily* family;
  bool ignore_merges;  // llama.cpp takes a piece that is itself a token whole (Llama 3 does)
  bool add_bos;        // llama.cpp's default when the file has no tokenizer.ggml.add_bos_token
};

// The tokenizer.ggml.pre names llama.cpp (llama-vocab.cpp, 0.3.36's copy) maps to these splits, with its
// flags. "default" gets GPT-2's split; llama.cpp's own "default" adds digit splits of its own that no
// Hugging Face tokenizer has.
const PreName kPreNames[] = {
    {"llama3", &kLlama3, true, true},
    {"llama-bpe", &kLlama3, true, true},
    {"llama-v3", &kLlama3, true, true},
    {"falcon3", &kLlama3, true, true},
    {"falcon-h1", &kLlama3, true, true},
    {"pixtral", &kLlama3, true, true},
    {"midm-2.0", &kLlama3, true, true},
    {"lfm2", &kLlama3, true, true},
    {"dbrx", &kLlama3, false, false},
    {"smaug-bpe", &kLlama3, false, false},
    {"qwen2", &kQwen2, false, false},
    {"deepseek-r1-qwen", &kQwen2, false, false},
    {"kormo", &kQwen2, false, false},
    {"stablelm2", &kQwen2, false, false},
    {"megrez", &kQwen2, false, false},
    {"hunyuan", &kQwen2, false, false},
    {"gpt2", &kGpt2, false, false},
    {"gpt-2", &kGpt2, false, false},
    {"phi-2", &kGpt2, false, false},
    {"mpt", &kGpt2, false, false},
    {"olmo", &kGpt2, false, false},
    {"jais", &kGpt2, false, false},
    {"exaone4", &kGpt2, false, false},
    {"trillion", &kGpt2, false, false},
    {"default", &kGpt2, false, false},
    {"smollm", &kDigitsThenGpt2, false, false},
    {"starcoder", &kDigitsThenGpt2, false, false},
    {"refact", &kDigitsThenGpt2, false, false},
    {"command-r", &kDigitsThenGpt2, false, false},
    {"codeshell", &kDigitsThenGpt2, false, false},
    {"exaone", &kDigitsThenGpt2, false, false},
    {"minerva-7b", &kDigitsThenGpt2, false, false},
};

const PreName& pre_name(const std::string& pre, const std::string& path) {
  for (const auto& entry : kPreNames)
    if (pre == entry.name) return entry;
  std::string names;
  for (const auto& entry : kPreNames) names += fmt::format("{}{}", names.empty() ? "" : ", ", entry.name);
  fail("'{}': tokenizer.ggml.pre '{}' is not supported (supported: {})", path, pre, names);
}

}  // namespace

std::unique_ptr<TokenizerBackend> load_bpe_from_gguf(const std::string& path) {
  const auto file = gguf::GgufFile::open_metadata(path);
  KVC_CHECK(file->has("tokenizer.ggml.model"),
            "'{}': metadata key 'tokenizer.ggml.model' is missing (no tokenizer "
            "in this GGUF)",
            path);
  const std::string model = file->get_string("tokenizer.ggml.model");
  KVC_CHECK(model != "llama",
            "'{}': tokenizer.ggml.model 'llama' (SentencePiece-style vocabulary) is not read yet; "
            "only 'gpt2' (byte-level BPE) is",
            path);
  KVC_CHECK(model == "gpt2", "'{}': tokenizer.ggml.model '{}' is not supported (gpt2)", path, model);

  BpeSpec spec;
  spec.source = path;
  spec.merges_field = "tokenizer.ggml.merges";
  const auto& tokens = file->get_string_array("tokenizer.ggml.tokens");
  std::vector<int64_t> types;
  if (file->has("tokenizer.ggml.token_type")) {
    types = file->get_int_array("tokenizer.ggml.token_type");
    KVC_CHECK(types.size() == tokens.size(), "'{}': tokenizer.ggml.token_type has {} entries for {} tokens", path,
              types.size(), tokens.size());
  }
  spec.vocab.reserve(tokens.size());
  for (size_t id = 0; id < tokens.size(); ++id) {
    const int64_t type = types.empty() ? kNormal : types[id];
    // Control and user-defined tokens are matched whole before BPE, as added tokens are in tokenizer.json.
    if (type == kControl || type == kUserDefined) {
      AddedToken added;
      added.id = static_cast<int>(id);
      added.content = tokens[id];
      added.special = type == kControl;
      spec.added_tokens.push_back(std::move(added));
    }
    spec.vocab.emplace_back(tokens[id], static_cast<int>(id));
  }
  const auto& merges = file->get_string_array("tokenizer.ggml.merges");
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const size_t space = merges[i].find(' ', 1);
    KVC_CHECK(space != std::string::npos, "'{}': tokenizer.ggml.merges[{}] '{}' is not two tokens separated by a space",
              path, i, merges[i]);
    spec.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
  }

  const std::string pre = file->has("tokenizer.ggml.pre") ? file->get_string("tokenizer.ggml.pre") : "default";
  const PreName& family = pre_name(pre, path);
  spec.ignore_merges = family.ignore_merges;
  for (const char* pattern : family.family->patterns) {
    PreTokenizerStep split;
    split.regex =
        std::make_shared<RegexSplitter>(pattern, false, fmt::format("'{}': tokenizer.ggml.pre '{}'", path, pre));
    spec.pre_tokenizer.push_back(std::move(split));
  }
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::ByteLevel;
  byte_level.use_regex = false;
  spec.pre_tokenizer.push_back(std::move(byte_level));

  const auto token_id = [&](const char* key) -> std::optional<int> {
    if (!file->has(key)) return std::nullopt;
    const uint32_t id = file->get_u32(key);
    KVC_CHECK(id < tokens.size(), "'{}': {} = {} is outside the {} tokens", path, key, id, tokens.size());
    return static_cast<int>(id);
  };
  spec.bos_id = token_id("tokenizer.ggml.bos_token_id");
  if (const auto eos = token_id("tokenizer.ggml.eos_token_id")) spec.eos_ids.push_back(*eos);
  if (const auto eot = token_id("tokenizer.ggml.eot_token_id"))
    if (spec.eos_ids.empty() || spec.eos_ids[0] != *eot) spec.eos_ids.push_back(*eot);
  const bool add_bos =
      file->has("tokenizer.ggml.add_bos_token") ? file->get_bool("tokenizer.ggml.add_bos_token") : family.add_bos;
  if (add_bos) {
    KVC_CHECK(spec.bos_id.has_value(),
              "'{}': tokenizer.ggml.add_bos_token is true but tokenizer.ggml.bos_token_id "
              "is missing",
              path);
    spec.prefix_ids.push_back(*spec.bos_id);
  }
  if (file->has("tokenizer.ggml.add_eos_token") && file->get_bool("tokenizer.ggml.add_eos_token") &&
      !spec.eos_ids.empty())
    spec.suffix_ids.push_back(spec.eos_ids[0]);
  return make_bpe_tokenizer(std::move(spec));
}

}  // namespace kvc
