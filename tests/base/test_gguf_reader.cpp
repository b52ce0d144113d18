// GGUF container reader: a hand-built valid file read back field by field, typed metadata lookups, and
// every malformed input rejected with one line that says what is wrong.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "support/expect_error.h"
#include "support/gguf_test_writer.h"
#include "util/error.h"

namespace fs = std::filesystem;
using kvc::gguf::GgufFile;
using kvc::test::GgufTestWriter;

namespace {

std::string temp_path(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("kvc-gguf-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = temp_path(name);
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

using kvc::test::expect_error;

void expect_open_error(const std::string& name, const std::string& bytes, const std::string& needle) {
  const std::string path = write_file(name, bytes);
  expect_error([&] { GgufFile::open(path); }, needle);
}

std::string f32_bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// One F32 tensor and one Q8_0 tensor (2 blocks of 32 values, 34 bytes each) plus metadata of each kind.
GgufTestWriter valid_writer() {
  GgufTestWriter w;
  w.add_string("general.architecture", "llama");
  w.add_u32("llama.block_count", 2);
  w.add_i32("test.negative", -7);
  w.add_u64("test.big", 1ull << 40);
  w.add_f32("llama.rope.freq_base", 10000.0f);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_string_array("tokenizer.ggml.tokens", {"a", "b", "ab"});
  w.add_i32_array("tokenizer.ggml.token_type", {1, 1, 3});
  w.add_f32_array("tokenizer.ggml.scores", {0.5f, -1.0f, 2.0f});
  w.add_tensor("weight", {4, 2}, 0, 0, f32_bytes({1, 2, 3, 4, 5, 6, 7, 8}));
  w.add_tensor("quantized", {64}, 8, 32, std::string(68, '\x01'));
  return w;
}

}  // namespace

// A tokenizer needs the metadata only: the first chunk of a split download opens with open_metadata,
// whereas open (what model loading uses) refuses it as truncated.
TEST(GgufReader, MetadataOnlyReadAcceptsAFileWithoutItsTensorData) {
  const std::string whole = valid_writer().build();
  const std::string path = write_file("first-chunk.gguf", whole.substr(0, whole.size() - 40));
  expect_error([&] { GgufFile::open(path); }, "runs past the end of the file");
  const auto file = GgufFile::open_metadata(path);
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens").size(), 3u);
  ASSERT_EQ(file->tensors().size(), 2u);
  EXPECT_EQ(file->tensor("weight").data, nullptr);
  // Everything before the tensor data is still checked.
  expect_error([&] { GgufFile::open_metadata(write_file("header-only.gguf", whole.substr(0, 30))); }, "cannot fit");
}

// Downloads are not always named .gguf: the magic decides.
TEST(GgufReader, AFileStartingWithTheMagicIsGguf) {
  EXPECT_TRUE(kvc::gguf::is_gguf_file(write_file("model_part_0000", valid_writer().build())));
  EXPECT_TRUE(kvc::gguf::is_gguf_file(write_file("bad-magic.gguf", "GGUX")));
  EXPECT_FALSE(kvc::gguf::is_gguf_file(write_file("tokenizer.model", "\x0a\x0bnot gguf")));
}

TEST(GgufReader, ReadsMetadataAndTensors) {
  const auto file = GgufFile::open(write_file("valid.gguf", valid_writer().build()));
  EXPECT_EQ(file->version(), 3u);
  EXPECT_EQ(file->alignment(), 32u);
  EXPECT_EQ(file->data_offset() % 32, 0u);
  EXPECT_EQ(file->get_string("general.architecture"), "llama");
  EXPECT_EQ(file->get_u32("llama.block_count"), 2u);
  EXPECT_EQ(file->get_i32("llama.block_count"), 2);  // any integer type that fits
  EXPECT_EQ(file->get_i32("test.negative"), -7);
  EXPECT_EQ(file->get_u64("test.big"), 1ull << 40);
  EXPECT_FLOAT_EQ(file->get_f32("llama.rope.freq_base"), 10000.0f);
  EXPECT_TRUE(file->get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(file->get_string_array("tokenizer.ggml.tokens"), (std::vector<std::string>{"a", "b", "ab"}));
  EXPECT_EQ(file->get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{1, 1, 3}));
  EXPECT_EQ(file->get_float_array("tokenizer.ggml.scores"), (std::vector<double>{0.5, -1.0, 2.0}));

  ASSERT_EQ(file->tensors().size(), 2u);
  const auto& weight = file->tensor("weight");
  EXPECT_EQ(weight.shape, (std::vector<uint64_t>{4, 2}));
  EXPECT_EQ(weight.nbytes, 32u);
  EXPECT_STREQ(kvc::gguf::ggml_type_info(weight.type)->name, "F32");
  float values[8];
  std::memcpy(values, weight.data, sizeof values);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[7], 8.0f);
  const auto& quantized = file->tensor("quantized");
  EXPECT_EQ(quantized.nbytes, 68u);  // 64 values = 2 blocks of Q8_0
  EXPECT_EQ(quantized.offset, 32u);
  EXPECT_EQ(quantized.data[0], 1);
}

TEST(GgufReader, HonoursGeneralAlignment) {
  GgufTestWriter w;
  w.alignment = 64;
  w.set_alignment_key = true;
  w.add_tensor("a", {8}, 0, 0, f32_bytes({0, 1, 2, 3, 4, 5, 6, 7}));
  w.add_tensor("b", {8}, 0, 64, f32_bytes({8, 9, 10, 11, 12, 13, 14, 15}));
  const auto file = GgufFile::open(write_file("align64.gguf", w.build()));
  EXPECT_EQ(file->alignment(), 64u);
  EXPECT_EQ(file->data_offset() % 64, 0u);
  float first;
  std::memcpy(&first, file->tensor("b").data, 4);
  EXPECT_EQ(first, 8.0f);
  EXPECT_EQ(GgufFile::open(write_file("v2.gguf",
                                      [] {
                                        GgufTestWriter v2 = valid_writer();
                                        v2.version = 2;
                                        return v2.build();
                                      }()))
                ->version(),
            2u);
}

TEST(GgufReader, TypedLookupsNameTheKey) {
  const auto file = GgufFile::open(write_file("lookups.gguf", valid_writer().build()));
  expect_error([&] { file->get_string("general.name"); }, "metadata key 'general.name' is missing");
  expect_error([&] { file->get_u32("general.architecture"); }, "'general.architecture' is string, expected a u32");
  expect_error([&] { file->get_u32("test.negative"); }, "'test.negative' = -7 does not fit a u32");
  expect_error([&] { file->get_string_array("tokenizer.ggml.token_type"); },
               "'tokenizer.ggml.token_type' is an array of i32, expected an array of string");
  expect_error([&] { file->get_bool("llama.block_count"); }, "'llama.block_count' is u32, expected a bool");
  expect_error([&] { file->tensor("missing"); }, "tensor 'missing' not found");
}

TEST(GgufReaderErrors, TruncatedFile) {
  const std::string bytes = valid_writer().build();
  expect_open_error("empty.gguf", "", "file too short for a GGUF header");
  expect_open_error("cut-header.gguf", bytes.substr(0, 12), "truncated: tensor count needs 8 bytes");
  expect_open_error("cut-count.gguf", bytes.substr(0, 60), "metadata count 9 cannot fit in the 36 bytes left");
  expect_open_error("cut-metadata.gguf", bytes.substr(0, 150), "truncated: metadata 'test.big' type needs 4 bytes");
  expect_open_error("cut-data.gguf", bytes.substr(0, bytes.size() - 10), "runs past the end of the file");
}

TEST(GgufReaderErrors, WrongMagic) {
  std::string bytes = valid_writer().build();
  bytes[0] = 'X';
  expect_open_error("magic.gguf", bytes, "not a GGUF file");
}

TEST(GgufReaderErrors, WrongVersion) {
  for (uint32_t version : {1u, 4u}) {
    GgufTestWriter w = valid_writer();
    w.version = version;
    expect_open_error("version.gguf", w.build(), "GGUF version " + std::to_string(version) + " is not supported");
  }
}

TEST(GgufReaderErrors, TensorDataPastTheEnd) {
  GgufTestWriter w;
  w.add_tensor("weight", {1024}, 0, 0, f32_bytes({1, 2, 3}));  // needs 4096 bytes, has 12
  expect_open_error("past-end.gguf", w.build(), "tensor 'weight' (4096 bytes at data offset 0) runs past the end");
}

TEST(GgufReaderErrors, UnknownTensorType) {
  GgufTestWriter w;
  w.add_tensor("weight", {32}, 99, 0, std::string(128, '\0'));
  expect_open_error("type.gguf", w.build(), "tensor 'weight' has unknown ggml type 99");
  GgufTestWriter retired;
  retired.add_tensor("weight", {32}, 4, 0, std::string(128, '\0'));  // Q4_2, removed from ggml
  expect_open_error("retired.gguf", retired.build(), "unknown ggml type 4");
}

TEST(GgufReaderErrors, MisalignedOffset) {
  GgufTestWriter w;
  w.add_tensor("a", {2}, 0, 0, f32_bytes({1, 2}));
  w.add_tensor("b", {2}, 0, 8, f32_bytes({3, 4}));
  expect_open_error("misaligned.gguf", w.build(), "tensor 'b' offset 8 is not a multiple of the alignment 32");
}

TEST(GgufReaderErrors, StringLengthPastTheEnd) {
  std::string bytes;
  GgufTestWriter::put<uint32_t>(bytes, 0x46554747);
  GgufTestWriter::put<uint32_t>(bytes, 3);
  GgufTestWriter::put<uint64_t>(bytes, 0);
  GgufTestWriter::put<uint64_t>(bytes, 1);
  GgufTestWriter::str(bytes, "general.name");
  GgufTestWriter::put<uint32_t>(bytes, 8);
  GgufTestWriter::put<uint64_t>(bytes, 1ull << 40);  // the string's length
  bytes += "short";
  expect_open_error("string.gguf", bytes, "metadata 'general.name' has length 1099511627776");
}

TEST(GgufReaderErrors, CountsAndShapesAreBounded) {
  std::string bytes;
  GgufTestWriter::put<uint32_t>(bytes, 0x46554747);
  GgufTestWriter::put<uint32_t>(bytes, 3);
  GgufTestWriter::put<uint64_t>(bytes, 0);
  GgufTestWriter::put<uint64_t>(bytes, 1);
  GgufTestWriter::str(bytes, "tokenizer.ggml.tokens");
  GgufTestWriter::put<uint32_t>(bytes, 9);
  GgufTestWriter::put<uint32_t>(bytes, 8);
  GgufTestWriter::put<uint64_t>(bytes, 1ull << 60);  // array count: no allocation happens for it
  expect_open_error("array.gguf", bytes, "claims 1152921504606846976 elements of string");

  std::string kvs = bytes.substr(0, 16);
  GgufTestWriter::put<uint64_t>(kvs, 1ull << 50);
  expect_open_error("kvcount.gguf", kvs, "metadata count 1125899906842624 cannot fit");

  GgufTestWriter dims;
  dims.add_tensor("t", {1, 1, 1, 1, 1}, 0, 0, f32_bytes({1}));
  expect_open_error("dims.gguf", dims.build(), "tensor 't' has 5 dimensions (1 to 4)");
  GgufTestWriter zero;
  zero.add_tensor("t", {4, 0}, 0, 0, f32_bytes({1}));
  expect_open_error("zero.gguf", zero.build(), "tensor 't' has a zero dimension");
  GgufTestWriter rows;
  rows.add_tensor("t", {48}, 12, 0, std::string(400, '\0'));  // Q4_K rows hold multiples of 256
  expect_open_error("rows.gguf", rows.build(), "not a multiple of its block of 256");
  GgufTestWriter twice = valid_writer();
  twice.add_u32("llama.block_count", 3);
  expect_open_error("twice.gguf", twice.build(), "metadata key 'llama.block_count' appears twice");
  GgufTestWriter bad_type;
  bad_type.add_u32("x", 1);
  std::string bad = bad_type.build();
  bad[24 + 8 + 1] = 42;  // the value type of key "x"
  expect_open_error("valuetype.gguf", bad, "metadata 'x' has unknown value type 42");
}
