// tokenizer.model is checked before libsentencepiece reads it. A real model with an nmt_nfkc
// normalizer (a precompiled character map) loads and tokenizes as the `sentencepiece` package does
// (tests/fixtures/sentencepiece/nfkc.json, scripts/make_sentencepiece_fixtures.py); the same file with
// its map damaged in place (where the package says the map lies) is refused with one line, before the
// library could read outside the map.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "tokenizer/spm_model_check.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
namespace {

const std::string kFixtures = std::string(KVC_SOURCE_DIR) + "/tests/fixtures/sentencepiece";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json goldens() { return nlohmann::json::parse(read_bytes(kFixtures + "/nfkc.json")); }

TEST(SentencePieceCheck, ARealNfkcModelTokenizesAsTheSentencepiecePackage) {
  const Tokenizer tokenizer = Tokenizer::load(kFixtures + "/nfkc");
  const nlohmann::json golden = goldens();  // a loop over goldens()["texts"] would outlive the temporary
  for (const auto& c : golden["texts"]) {
    EXPECT_EQ(tokenizer.encode(c["text"].get<std::string>()), c["ids"].get<std::vector<int>>()) << c["text"];
  }
}

// The model with its character map changed by `damage` (bytes of the map, trie size known), written
// into a folder of its own.
std::string damaged_model(const std::string& name, void (*damage)(char* map, size_t map_bytes, size_t trie_bytes)) {
  const nlohmann::json g = goldens();
  std::string model = read_bytes(kFixtures + "/nfkc/tokenizer.model");
  const auto offset = g["charsmap_offset"].get<size_t>();
  damage(&model[offset], g["charsmap_bytes"].get<size_t>(), g["trie_bytes"].get<size_t>());
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kvc-spm-" + name + "-" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/tokenizer.model", std::ios::binary) << model;
  return dir;
}

// Debian's libsentencepiece 0.1.97 reads these three maps out of bounds: the offsets one ends in
// SIGSEGV, the strings one in 118,532 ids for a 30-character text, the trie-size one reads past the map.
void expect_refused(const std::string& dir, const std::string& needle) {
  try {
    (void)Tokenizer::load(dir);
    ADD_FAILURE() << dir << ": a damaged character map was handed to libsentencepiece";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
    EXPECT_NE(message.find(needle), std::string::npos) << message;
  }
  std::filesystem::remove_all(dir);
}

TEST(SentencePieceCheck, ATrieSizePastTheMapIsRefused) {
  expect_refused(damaged_model("trie-size",
                               [](char* map, size_t map_bytes, size_t) {
                                 const uint32_t size = static_cast<uint32_t>(map_bytes - 1);
                                 std::memcpy(map, &size, 4);
                               }),
                 "trie size does not fit");
}

TEST(SentencePieceCheck, TrieOffsetsPastTheMapAreRefused) {
  expect_refused(damaged_model("offsets",
                               [](char* map, size_t, size_t trie_bytes) {
                                 for (size_t at = 4; at < 4 + trie_bytes; at += 4) {
                                   uint32_t unit;
                                   std::memcpy(&unit, map + at, 4);
                                   unit |= 0xFFFFFC00u;  // the largest offset field
                                   std::memcpy(map + at, &unit, 4);
                                 }
                               }),
                 "past its end");
}

TEST(SentencePieceCheck, ReplacementStringsWithoutTheirEndAreRefused) {
  expect_refused(damaged_model("strings",
                               [](char* map, size_t map_bytes, size_t trie_bytes) {
                                 std::memset(map + 4 + trie_bytes, 'A', map_bytes - 4 - trie_bytes);
                               }),
                 "replacement string");
}

TEST(SentencePieceCheck, BrokenFramingIsRefused) {
  EXPECT_THROW(check_sentencepiece_model(std::string("\x1a\xff\xff\xff\x0f", 5), "t.model"), Error);  // length past end
  EXPECT_THROW(check_sentencepiece_model(std::string("\x0f", 1), "t.model"), Error);                  // wire type 7
  EXPECT_THROW(check_sentencepiece_model("", "t.model"), Error);
  EXPECT_NO_THROW(check_sentencepiece_model(read_bytes(kFixtures + "/nfkc/tokenizer.model"), "nfkc"));
  EXPECT_NO_THROW(check_sentencepiece_model(
      read_bytes(std::string(KVC_SOURCE_DIR) + "/data/models/stories260K/tokenizer.model"), "stories260K"));
}

}  // namespace
}  // namespace kvc
