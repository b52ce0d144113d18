// kvc-tokenize as a user runs it: SentencePiece and byte-level BPE models, ids as text and JSON, the
// round trip through --decode, GGUF vocabularies, its --help examples, and bad input in one line.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "support/cli_expectations.h"
#include "support/gguf_test_writer.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace {

using kvc::test::expect_clean_error;
using kvc::test::run_command;

const std::string kSource = KVC_SOURCE_DIR;
const std::string kStories = kvc::test::model_dir("stories260K");
const std::string kLlama3Style = kSource + "/data/tokenizers/llama3-style/tokenizer.json";

std::string tokenize(const std::string& args) { return kvc::test::bin("kvc-tokenize") + " " + args; }

std::vector<int> ids_of(const kvc::test::CommandResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out)["ids"].get<std::vector<int>>();
}

}  // namespace

TEST(TokenizeCli, SentencePieceIdsWithAndWithoutBos) {
  // The reference's greedy prompt ids (data/reference/stories260K) start this way.
  EXPECT_EQ(ids_of(run_command(tokenize("-m " + kStories + " -p 'Once upon a time' --json"))),
            (std::vector<int>{1, 403, 407, 261, 378}));
  const auto plain = run_command(tokenize("-m " + kStories + " -p 'Once upon a time' --no-bos"));
  EXPECT_EQ(plain.out, "403 407 261 378\n");
  const auto text = run_command(tokenize("-m " + kStories + " --decode -p '1 403 407 261 378'"));
  EXPECT_EQ(text.out, "Once upon a time");
}

TEST(TokenizeCli, BpeMatchesTheGoldenIds) {
  const auto gold = nlohmann::json::parse(kvc::test::slurp(kSource + "/data/tokenizers/goldens/llama3-style.json"));
  const auto corpus = nlohmann::json::parse(kvc::test::slurp(kSource + "/data/tokenizers/corpus.json"));
  const std::string dir = kvc::test::make_temp_dir("kvc-tokenize");
  // Text #6 is code with indentation and newlines: a file keeps it byte for byte.
  kvc::test::write_bytes(dir + "/code.txt", corpus["texts"][6].get<std::string>());
  std::vector<int> expected = gold["special_prefix"].get<std::vector<int>>();
  for (int id : gold["cases"][6]["ids"]) expected.push_back(id);
  EXPECT_EQ(ids_of(run_command(tokenize("-m " + kLlama3Style + " -f " + dir + "/code.txt --json"))), expected);
}

TEST(TokenizeCli, DecodeGivesTheFileBack) {
  const std::string text_file = kvc::test::data_file("tinystories/tinystories_excerpt_30k.txt");
  for (const std::string& model : {kStories, kLlama3Style, kSource + "/data/tokenizers/qwen2-style"}) {
    const std::string dir = kvc::test::make_temp_dir("kvc-tokenize");
    const auto encoded = run_command(tokenize("-m " + model + " --no-bos -f " + text_file + " --json"));
    ASSERT_EQ(encoded.exit_code, 0) << encoded.err;
    kvc::test::write_bytes(dir + "/ids.json", encoded.out);
    const auto decoded = run_command(tokenize("-m " + model + " --decode -f " + dir + "/ids.json"));
    ASSERT_EQ(decoded.exit_code, 0) << decoded.err;
    EXPECT_EQ(decoded.out, kvc::test::slurp(text_file)) << model;
  }
}

TEST(TokenizeCli, ReadsTheVocabularyOfAGgufFile) {
  kvc::test::GgufTestWriter w;
  w.add_string("tokenizer.ggml.model", "gpt2");
  w.add_string("tokenizer.ggml.pre", "llama-bpe");
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab", "Ġ", "Ġab", "<s>"});
  w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 1, 1, 1, 3});
  w.add_string_array("tokenizer.ggml.merges", {"a b", "Ġ ab"});
  w.add_u32("tokenizer.ggml.bos_token_id", 5);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  const std::string dir = kvc::test::make_temp_dir("kvc-tokenize");
  kvc::test::write_bytes(dir + "/vocab.gguf", w.build());
  EXPECT_EQ(ids_of(run_command(tokenize("-m " + dir + "/vocab.gguf -p 'ab ab<s>' --json"))),
            (std::vector<int>{5, 2, 4, 5}));
  w.add_string("tokenizer.ggml.pre", "mystery");  // a second key of the same name: the reader refuses it
  kvc::test::write_bytes(dir + "/twice.gguf", w.build());
  expect_clean_error(run_command(tokenize("-m " + dir + "/twice.gguf -p x")),
                     "metadata key 'tokenizer.ggml.pre' appears twice");
}

TEST(TokenizeCli, BenchReportsSpeed) {
  const auto r = run_command(tokenize("-m " + kLlama3Style + " --bench --bench-passes 1 --json -f " +
                                      kvc::test::data_file("tinystories/tinystories_excerpt_30k.txt")));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto bench = nlohmann::json::parse(r.out);
  EXPECT_GT(bench["tokens"].get<int>(), 1000);
  EXPECT_GT(bench["best_mb_per_s"].get<double>(), 0.0);
}

TEST(TokenizeCliErrors, OneLineNamingTheProblem) {
  const std::string dir = kvc::test::make_temp_dir("kvc-tokenize-bad");
  expect_clean_error(run_command(tokenize("-m /nonexistent -p hi")), "tokenizer not found: '/nonexistent'");
  expect_clean_error(run_command(tokenize("-m " + dir + " -p hi")), "has no tokenizer.json or tokenizer.model");
  kvc::test::write_bytes(dir + "/tokenizer.json", R"({"version": "1.0", "pre_tokenizer": null})");
  expect_clean_error(run_command(tokenize("-m " + dir + "/tokenizer.json -p hi")), "missing 'model'");
  kvc::test::write_bytes(dir + "/broken.json", "{ not json");
  expect_clean_error(run_command(tokenize("-m " + dir + "/broken.json -p hi")), "is not valid JSON");
  expect_clean_error(run_command(tokenize("-m " + kStories + " --decode -p '1 2 x'")), "'x' is not a token id");
  expect_clean_error(run_command(tokenize("-m " + kStories + " --decode -p '1 99999'")),
                     "token id 99999 is outside the vocabulary");
  expect_clean_error(run_command(tokenize("-m " + kLlama3Style + " --decode -p '99999'")),
                     "token id 99999 is outside the vocabulary");
  kvc::test::write_bytes(dir + "/bad.txt", "caf\xC3 au lait");
  expect_clean_error(run_command(tokenize("-m " + kLlama3Style + " -f " + dir + "/bad.txt")),
                     "not valid UTF-8 (byte 3 of 12)");
  kvc::test::write_bytes(dir + "/short.gguf", "GGUF\x03");
  expect_clean_error(run_command(tokenize("-m " + dir + "/short.gguf -p hi")), "truncated: version needs 4 bytes");
  const auto both = run_command(tokenize("-m " + kStories + " -p hi -f x.txt"));
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.err.find("excludes"), std::string::npos) << both.err;
}
