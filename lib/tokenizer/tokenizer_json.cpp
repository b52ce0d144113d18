#include "tokenizer/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include "io/generation_config.h"
#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/special_token_flags.h"
#include "util/error.h"
#include "util/files.h"
#include "util/json_file.h"

namespace kvc {
namespace {

using nlohmann::json;

// Reads tokenizer.json fields with errors that name the file and the JSON path of the field.
class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)) {}

  const json& member(const json& object, const std::string& key, const std::string& where) const {
    KVC_CHECK(object.is_object(), "'{}': '{}' is not a JSON object", path_, where);
    const auto it = object.find(key);
    KVC_CHECK(it != object.end(), "'{}': missing '{}'", path_, join(where, key));
    return *it;
  }
  std::string string_member(const json& object, const std::string& key, const std::string& where) const {
    const json& value = member(object, key, where);
    KVC_CHECK(value.is_string(), "'{}': '{}' is not a string", path_, join(where, key));
    return value.get<std::string>();
  }
  bool bool_member(const json& object, const std::string& key, const std::string& where, bool fallback) const {
    if (!object.is_object() || !object.contains(key) || object[key].is_null()) return fallback;
    KVC_CHECK(object[key].is_boolean(), "'{}': '{}' is not true or false", path_, join(where, key));
    return object[key].get<bool>();
  }
  int int_value(const json& value, const std::string& where) const {
    KVC_CHECK(value.is_number_integer(), "'{}': '{}' is not an integer", path_, where);
    const int64_t v = value.get<int64_t>();
    KVC_CHECK(v >= 0 && v <= INT32_MAX, "'{}': '{}' = {} is not a token id", path_, where, v);
    return static_cast<int>(v);
  }
  static std::string join(const std::string& where, const std::string& key) {
    return where.empty() ? key : where + "." + key;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

void read_vocab_and_merges(const Reader& r, const json& model, BpeSpec& spec) {
  const std::string type = model.contains("type") ? r.string_member(model, "type", "model") : "BPE";
  KVC_CHECK(type == "BPE", "'{}': model.type '{}' is not supported (kvc reads byte-level BPE)", r.path(), type);
  const json& vocab = r.member(model, "vocab", "model");
  KVC_CHECK(vocab.is_object(), "'{}': 'model.vocab' is not an object of token -> id", r.path());
  spec.vocab.reserve(vocab.size());
  for (const auto& [token, id] : vocab.items()) spec.vocab.emplace_back(token, r.int_value(id, "model.vocab." + token));

  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(key) && model[key].is_string() && !model[key].get<std::string>().empty())
      fail("'{}': model.{} '{}' is not supported (byte-level BPE has none)", r.path(), key,
           model[key].get<std::string>());
  }
  spec.ignore_merges = r.bool_member(model, "ignore_merges", "model", false);

  const json& merges = r.member(model, "merges", "model");
  KVC_CHECK(merges.is_array(), "'{}': 'model.merges' is not an array", r.path());
  spec.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    // Two spellings: "a b" (older files) and ["a", "b"] (newer ones, which allow spaces in tokens).
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      KVC_CHECK(space != std::string::npos && text.find(' ', space + 1) == std::string::npos,
                "'{}': model.merges[{}] '{}' is not two tokens separated by one space", r.path(), i, text);
      spec.merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else {
      KVC_CHECK(merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string(),
                "'{}': model.merges[{}] is not a pair of tokens", r.path(), i);
      spec.merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    }
  }
  spec.merges_field = "model.merges";
}

void read_pre_tokenizer(const Reader& r, const json& node, const std::string& where, BpeSpec& spec) {
  if (node.is_null()) return;
  const std::string type = r.string_member(node, "type", where);
  if (type == "Sequence") {
    const json& list = r.member(node, "pretokenizers", where);
    KVC_CHECK(list.is_array(), "'{}': '{}.pretokenizers' is not an array", r.path(), where);
    for (size_t i = 0; i < list.size(); ++i)
      read_pre_tokenizer(r, list[i], fmt::format("{}.pretokenizers[{}]", where, i), spec);
    return;
  }
  PreTokenizerStep step;
  if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::ByteLevel;
    step.add_prefix_space = r.bool_member(node, "add_prefix_space", where, false);
    step.use_regex = r.bool_member(node, "use_regex", where, true);
  } else if (type == "Split") {
    const json& pattern = r.member(node, "pattern", where);
    const bool literal = pattern.is_object() && pattern.contains("String");
    KVC_CHECK(pattern.is_object() && (literal || pattern.contains("Regex")),
              "'{}': '{}.pattern' is neither {{\"Regex\": ...}} nor {{\"String\": ...}}", r.path(), where);
    const std::string text = r.string_member(pattern, literal ? "String" : "Regex", where + ".pattern");
    step.regex = std::make_shared<RegexSplitter>(text, literal, fmt::format("'{}': {}.pattern", r.path(), where));
    const std::string behavior = r.string_member(node, "behavior", where);
    if (behavior == "Isolated") step.behavior = SplitBehavior::Isolated;
    else if (behavior == "Removed") step.behavior = SplitBehavior::Removed;
    else fail("'{}': {}.behavior '{}' is not supported (Isolated, Removed)", r.path(), where, behavior);
    step.invert = r.bool_member(node, "invert", where, false);
  } else {
    fail("'{}': {}.type '{}' is not a supported pre-tokenizer (Split, ByteLevel, Sequence)", r.path(), where, type);
  }
  spec.pre_tokenizer.push_back(std::move(step));
}

std::vector<int> special_ids(const Reader& r, const json& specials, const std::string& name, const std::string& where) {
  const json& entry = r.member(specials, name, where + ".special_tokens");
  const json& ids = r.member(entry, "ids", where + ".special_tokens." + name);
  KVC_CHECK(ids.is_array(), "'{}': '{}.special_tokens.{}.ids' is not an array", r.path(), where, name);
  std::vector<int> out;
  for (const json& id : ids) out.push_back(r.int_value(id, where + ".special_tokens." + name + ".ids"));
  return out;
}

void read_post_processor(const Reader& r, const json& node, const std::string& where, BpeSpec& spec) {
  if (node.is_null()) return;
  const std::string type = r.string_member(node, "type", where);
  if (type == "Sequence") {
    const json& list = r.member(node, "processors", where);
    KVC_CHECK(list.is_array(), "'{}': '{}.processors' is not an array", r.path(), where);
    for (size_t i = 0; i < list.size(); ++i)
      read_post_processor(r, list[i], fmt::format("{}.processors[{}]", where, i), spec);
  } else if (type == "ByteLevel") {
    // Only adjusts offsets: no ids.
  } else if (type == "TemplateProcessing") {
    const json& single = r.member(node, "single", where);
    KVC_CHECK(single.is_array(), "'{}': '{}.single' is not an array", r.path(), where);
    const json& specials = r.member(node, "special_tokens", where);
    bool after_text = false;
    for (const json& piece : single) {
      if (piece.is_object() && piece.contains("Sequence")) {
        after_text = true;
      } else if (piece.is_object() && piece.contains("SpecialToken")) {
        const std::string name = r.string_member(piece["SpecialToken"], "id", where + ".single.SpecialToken");
        auto& target = after_text ? spec.suffix_ids : spec.prefix_ids;
        for (int id : special_ids(r, specials, name, where)) target.push_back(id);
      } else {
        fail("'{}': '{}.single' holds an entry that is neither SpecialToken nor Sequence", r.path(), where);
      }
    }
  } else if (type == "RobertaProcessing" || type == "BertProcessing") {
    for (const char* key : {"cls", "sep"}) {
      const json& pair = r.member(node, key, where);
      KVC_CHECK(pair.is_array() && pair.size() == 2, "'{}': '{}.{}' is not [token, id]", r.path(), where, key);
      (std::string(key) == "cls" ? spec.prefix_ids : spec.suffix_ids)
          .push_back(r.int_value(pair[1], where + "." + key));
    }
  } else {
    fail("'{}': {}.type '{}' is not a supported post-processor (TemplateProcessing, ByteLevel, Sequence)", r.path(),
         where, type);
  }
}

void read_normalizer(const Reader& r, const json& node, const std::string& where, BpeSpec& spec) {
  if (node.is_null()) return;
  const std::string type = r.string_member(node, "type", where);
  if (type == "Sequence") {
    const json& list = r.member(node, "normalizers", where);
    for (size_t i = 0; i < list.size(); ++i)
      read_normalizer(r, list[i], fmt::format("{}.normalizers[{}]", where, i), spec);
    return;
  }
  KVC_CHECK(type == "NFC", "'{}': {}.type '{}' is not a supported normalizer (NFC)", r.path(), where, type);
  spec.nfc = true;
}

void read_added_tokens(const Reader& r, const json& root, BpeSpec& spec) {
  if (!root.contains("added_tokens") || root["added_tokens"].is_null()) return;
  const json& list = root["added_tokens"];
  KVC_CHECK(list.is_array(), "'{}': 'added_tokens' is not an array", r.path());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = fmt::format("added_tokens[{}]", i);
    AddedToken token;
    token.id = r.int_value(r.member(list[i], "id", where), where + ".id");
    token.content = r.string_member(list[i], "content", where);
    token.special = r.bool_member(list[i], "special", where, false);
    token.lstrip = r.bool_member(list[i], "lstrip", where, false);
    token.rstrip = r.bool_member(list[i], "rstrip", where, false);
    token.single_word = r.bool_member(list[i], "single_word", where, false);
    spec.added_tokens.push_back(std::move(token));
  }
}

std::optional<int> id_of(const BpeSpec& spec, const std::string& content) {
  for (const auto& t : spec.added_tokens)
    if (t.content == content) return t.id;
  for (const auto& [token, id] : spec.vocab)
    if (token == content) return id;
  return std::nullopt;
}

// tokenizer_config.json names BOS/EOS by content; generation_config.json lists the ids that stop generation.
void read_special_ids(const std::string& dir, BpeSpec& spec) {
  const std::string config_path = dir + "/tokenizer_config.json";
  if (file_exists(config_path)) {
    const json config = read_json_object(config_path);
    const auto content = [&](const char* key) -> std::optional<std::string> {
      if (!config.contains(key)) return std::nullopt;
      const json& v = config[key];
      if (v.is_string()) return v.get<std::string>();
      if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
      return std::nullopt;
    };
    if (const auto bos = content("bos_token")) spec.bos_id = id_of(spec, *bos);
    if (const auto eos = content("eos_token"))
      if (const auto id = id_of(spec, *eos)) spec.eos_ids.push_back(*id);
  }
  const std::string generation_path = dir + "/generation_config.json";
  if (file_exists(generation_path)) {
    const GenerationConfig generation = read_generation_config(generation_path);
    if (generation.bos_id) spec.bos_id = generation.bos_id;
    if (!generation.eos_ids.empty()) spec.eos_ids = generation.eos_ids;
  }
}

bool mentions_byte_level(const json& node) {
  if (node.is_object()) {
    if (node.contains("type") && node["type"] == "ByteLevel") return true;
    for (const auto& [key, value] : node.items())
      if (mentions_byte_level(value)) return true;
  } else if (node.is_array()) {
    for (const json& value : node)
      if (mentions_byte_level(value)) return true;
  }
  return false;
}

}  // namespace

bool tokenizer_json_is_byte_level(const std::string& path) {
  const json root = read_json_object(path);
  return root.is_object() && (mentions_byte_level(root.value("pre_tokenizer", json())) ||
                              mentions_byte_level(root.value("decoder", json())));
}

std::unique_ptr<TokenizerBackend> load_tokenizer_json(const std::string& path) {
  const json root = read_json_object(path);
  const Reader r(path);
  KVC_CHECK(root.is_object(), "'{}' is not a tokenizer.json (the top level is not an object)", path);
  BpeSpec spec;
  spec.source = path;
  read_vocab_and_merges(r, r.member(root, "model", ""), spec);
  read_normalizer(r, root.value("normalizer", json()), "normalizer", spec);
  read_pre_tokenizer(r, root.value("pre_tokenizer", json()), "pre_tokenizer", spec);
  KVC_CHECK(
      mentions_byte_level(root.value("pre_tokenizer", json())) || mentions_byte_level(root.value("decoder", json())),
      "'{}': neither 'pre_tokenizer' nor 'decoder' is ByteLevel; kvc reads byte-level BPE from tokenizer.json "
      "and SentencePiece models from tokenizer.model",
      path);
  read_post_processor(r, root.value("post_processor", json()), "post_processor", spec);
  read_added_tokens(r, root, spec);
  const size_t slash = path.rfind('/');
  read_special_ids(slash == std::string::npos ? "." : path.substr(0, slash), spec);
  // Without a tokenizer_config.json, the post-processor's first id is the BOS (Llama 3: <|begin_of_text|>).
  if (!spec.bos_id && !spec.prefix_ids.empty()) spec.bos_id = spec.prefix_ids.front();
  apply_add_special_flags(read_add_special_flags(slash == std::string::npos ? "." : path.substr(0, slash)), spec.bos_id,
                          spec.eos_ids.empty() ? std::nullopt : std::optional<int>(spec.eos_ids.front()),
                          spec.prefix_ids, spec.suffix_ids, path);
  return make_bpe_tokenizer(std::move(spec));
}

}  // namespace kvc
