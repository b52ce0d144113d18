// Safetensors reader, writer and checkpoint folders: round trips, the real stories260K file, and every
// malformed input rejected with a kvc::Error that says what is wrong.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "io/content_checksum.h"
#include "io/safetensors.h"
#include "support/expect_error.h"
#include "util/error.h"

namespace fs = std::filesystem;
using namespace kvc::st;

namespace {

const std::string kStories = std::string(KVC_SOURCE_DIR) + "/data/models/stories260K";

std::string le64(uint64_t value) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(value >> (8 * i));
  return bytes;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A file crafted by hand: length prefix, header text as given, then the data section.
void write_safetensors(const std::string& path, const std::string& header, const std::string& data) {
  write_bytes(path, le64(header.size()) + header + data);
}

template <typename T>
std::vector<T> read_as(const uint8_t* data, size_t count) {
  std::vector<T> values(count);
  std::memcpy(values.data(), data, count * sizeof(T));
  return values;
}

using kvc::test::expect_error;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "kvc_st_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Writes `header` + `data` and expects opening it to fail with `needle` and the file's path.
  void expect_open_error(const std::string& header, const std::string& data, const std::string& needle) {
    const std::string file = path("bad.safetensors");
    write_safetensors(file, header, data);
    expect_error([&] { SafetensorsFile::open(file); }, needle);
    expect_error([&] { SafetensorsFile::open(file); }, file);
  }

  std::string dir_;
};

// ---- DType -----------------------------------------------------------------------------------

TEST(DTypeTest, NamesAndSizesMatchTheSpec) {
  const std::vector<std::tuple<DType, std::string, size_t>> expected = {
      {DType::F64, "F64", 8}, {DType::F32, "F32", 4},  {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
      {DType::I64, "I64", 8}, {DType::I32, "I32", 4},  {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
      {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1}};
  for (const auto& [dtype, name, size] : expected) {
    EXPECT_EQ(dtype_name(dtype), name);
    EXPECT_EQ(dtype_size(dtype), size) << name;
    EXPECT_EQ(parse_dtype(name, "test"), dtype);
  }
}

TEST(DTypeTest, UnknownNameIsAnErrorNamingTheContext) {
  expect_error([] { parse_dtype("F8_E4M3", "tensor 'w' in 'x.safetensors'"); }, "tensor 'w' in 'x.safetensors'");
  expect_error([] { parse_dtype("f32", "ctx"); }, "unknown dtype 'f32'");
}

TEST(DTypeTest, CheckedNbytesGuardsOverflowAndNegativeDims) {
  EXPECT_EQ(checked_nbytes(DType::F32, {2, 3}), 24u);
  EXPECT_EQ(checked_nbytes(DType::F16, {}), 2u);  // a scalar holds one element
  EXPECT_EQ(checked_nbytes(DType::F64, {4, 0, 7}), 0u);
  EXPECT_FALSE(checked_nbytes(DType::F32, {-1, 4}).has_value());
  EXPECT_FALSE(checked_nbytes(DType::U8, {int64_t{1} << 32, int64_t{1} << 32}).has_value());
  EXPECT_FALSE(checked_nbytes(DType::F64, {int64_t{1} << 61}).has_value());  // elements fit, bytes do not
}

// ---- Writer round trip -------------------------------------------------------------------------

TEST_F(SafetensorsTest, RoundTripKeepsNamesShapesDtypesBytesAndMetadata) {
  const std::vector<float> weights = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
  const std::vector<uint16_t> halves = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000};  // odd count: 10 bytes
  const std::vector<uint8_t> bytes = {1, 2, 3};
  const std::vector<double> doubles = {3.141592653589793, -0.5};
  const int64_t scalar = -123456789012345;
  const std::vector<uint16_t> bf16 = {0x3f80, 0xbf80};

  SafetensorsWriter writer;
  // Deliberately added small dtypes first: the writer must still keep 8-byte dtypes 8-aligned.
  writer.add("bytes", DType::U8, {3}, bytes.data(), bytes.size());
  writer.add("halves", DType::F16, {5}, halves.data(), halves.size() * 2);
  writer.add("layer.weight", DType::F32, {2, 3}, weights.data(), weights.size() * 4);
  writer.add("doubles", DType::F64, {2}, doubles.data(), doubles.size() * 8);
  writer.add("scalar", DType::I64, {}, &scalar, 8);
  writer.add("empty", DType::BOOL, {0, 4}, nullptr, 0);
  writer.add("bf16", DType::BF16, {1, 2}, bf16.data(), bf16.size() * 2);
  writer.set_metadata("format", "pt");
  writer.set_metadata("method", "kvc test");
  const std::string file = path("out.safetensors");
  writer.write(file);

  // Nothing but the target is left in the folder: the temporary file was renamed away.
  std::vector<std::string> entries;
  for (const auto& entry : fs::directory_iterator(dir_)) entries.push_back(entry.path().filename().string());
  EXPECT_EQ(entries, std::vector<std::string>{"out.safetensors"});

  const auto st = SafetensorsFile::open(file);
  EXPECT_EQ(st->path(), file);
  EXPECT_EQ(st->names(),
            (std::vector<std::string>{"bf16", "bytes", "doubles", "empty", "halves", "layer.weight", "scalar"}));
  EXPECT_EQ(st->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"method", "kvc test"}}));

  EXPECT_EQ(st->info("layer.weight").dtype, DType::F32);
  EXPECT_EQ(st->info("layer.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(read_as<float>(st->data("layer.weight"), 6), weights);
  EXPECT_EQ(st->info("halves").dtype, DType::F16);
  EXPECT_EQ(read_as<uint16_t>(st->data("halves"), 5), halves);
  EXPECT_EQ(st->info("bytes").dtype, DType::U8);
  EXPECT_EQ(read_as<uint8_t>(st->data("bytes"), 3), bytes);
  EXPECT_EQ(st->info("doubles").dtype, DType::F64);
  EXPECT_EQ(read_as<double>(st->data("doubles"), 2), doubles);
  EXPECT_EQ(st->info("scalar").dtype, DType::I64);
  EXPECT_TRUE(st->info("scalar").shape.empty());
  EXPECT_EQ(st->info("scalar").numel(), 1);
  EXPECT_EQ(read_as<int64_t>(st->data("scalar"), 1)[0], scalar);
  EXPECT_EQ(st->info("empty").dtype, DType::BOOL);
  EXPECT_EQ(st->info("empty").shape, (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(st->info("empty").nbytes(), 0u);
  EXPECT_EQ(st->info("bf16").dtype, DType::BF16);
  EXPECT_EQ(read_as<uint16_t>(st->data("bf16"), 2), bf16);

  // Header padded to a multiple of 8; each tensor aligned to its element size, 8-byte ones to 8.
  std::ifstream in(file, std::ios::binary);
  char prefix[8];
  in.read(prefix, 8);
  const uint64_t header_length = read_as<uint64_t>(reinterpret_cast<const uint8_t*>(prefix), 1)[0];
  EXPECT_EQ(header_length % 8, 0u);
  for (const std::string& name : st->names()) {
    const auto address = reinterpret_cast<uintptr_t>(st->data(name));
    EXPECT_EQ(address % dtype_size(st->info(name).dtype), 0u) << name;
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(st->data("doubles")) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(st->data("scalar")) % 8, 0u);

  // Contiguous, no holes: the data section is exactly the tensors' bytes (6*4 + 5*2 + 3 + 2*8 + 8 + 0 + 2*2).
  EXPECT_EQ(st->file_size(), 8 + header_length + 65);
}

// The definition of kvc.checksum written out plainly (one pass, words read in place), against which the
// streaming class is checked: 64-bit words round-robin over four FNV-1a lanes, the tail zero-padded,
// then the lanes and the byte count folded.
std::string reference_checksum(const std::string& bytes) {
  std::string padded = bytes;
  padded.append((32 - padded.size() % 32) % 32, '\0');
  uint64_t lanes[4] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL, 0x9ce484222325cbf2ULL, 0x2325cbf29ce48422ULL};
  for (size_t word = 0; word * 8 < padded.size(); ++word) {
    uint64_t w;
    std::memcpy(&w, padded.data() + word * 8, 8);
    lanes[word % 4] = (lanes[word % 4] ^ w) * 0x100000001b3ULL;
  }
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t v : {lanes[0], lanes[1], lanes[2], lanes[3], uint64_t{bytes.size()}}) h = (h ^ v) * 0x100000001b3ULL;
  h ^= h >> 29;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return std::string("w4fnv64:") + hex;
}

TEST(ContentChecksum, PiecesOfAnySizeGiveTheDefinitionsValue) {
  std::mt19937_64 rng(3);
  for (size_t size : {size_t{0}, size_t{1}, size_t{31}, size_t{32}, size_t{33}, size_t{1000}, size_t{4099}}) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    for (int trial = 0; trial < 20; ++trial) {
      kvc::st::ContentChecksum checksum;
      size_t at = 0;
      while (at < size) {
        const size_t piece = std::min<size_t>(size - at, rng() % 70);
        checksum.update(bytes.data() + at, piece);
        at += piece;
      }
      ASSERT_EQ(checksum.finish(), reference_checksum(bytes)) << "size " << size << ", trial " << trial;
    }
  }
}

TEST(ContentChecksum, EveryOneBitChangeAndEveryLengthChangeIsSeen) {
  std::string bytes(300, '\0');
  std::mt19937_64 rng(5);
  for (char& c : bytes) c = static_cast<char>(rng());
  const std::string original = reference_checksum(bytes);
  for (size_t i = 0; i < bytes.size(); ++i)
    for (int bit = 0; bit < 8; ++bit) {
      std::string changed = bytes;
      changed[i] = static_cast<char>(changed[i] ^ (1 << bit));
      ASSERT_NE(reference_checksum(changed), original) << "byte " << i << " bit " << bit;
    }
  // Zeros appended (what the padding adds) count through the length.
  EXPECT_NE(reference_checksum(bytes + std::string(4, '\0')), original);
  EXPECT_NE(reference_checksum(bytes.substr(0, 299)), reference_checksum(bytes.substr(0, 299) + '\0'));
}

// Every file the writer makes carries kvc.checksum; opening it verifies and hides the entry. A bit
// flipped in the data, a metadata value or a shape changed in the header is refused in one line; the
// header's padding is not content, and a file with no checksum (another writer's) opens as before.
TEST_F(SafetensorsTest, WrittenFilesCarryAChecksumThatOpeningVerifies) {
  const std::vector<float> weights = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f, 8.0f, 9.0f};
  SafetensorsWriter writer;
  writer.add("w", DType::F32, {2, 4}, weights.data(), weights.size() * 4);
  writer.set_metadata("tau", "0.5");
  writer.set_metadata("model", "x");  // makes the header need padding, for the padding check below
  writer.set_metadata(kvc::st::kChecksumKey, "w4fnv64:0000000000000000");  // copied from another file: replaced
  const std::string file = path("sealed.safetensors");
  writer.write(file);
  const auto st = SafetensorsFile::open(file);
  EXPECT_EQ(st->metadata(), (std::map<std::string, std::string>{{"model", "x"}, {"tau", "0.5"}}));
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_NE(bytes.find("\"kvc.checksum\":\"w4fnv64:"), std::string::npos);
  const uint64_t header_length = read_as<uint64_t>(reinterpret_cast<const uint8_t*>(bytes.data()), 1)[0];

  const auto expect_refused = [&](std::string damaged, const std::string& what) {
    SCOPED_TRACE(what);
    write_bytes(path("damaged.safetensors"), damaged);
    expect_error([&] { SafetensorsFile::open(path("damaged.safetensors")); }, "fails its checksum");
  };
  for (size_t at = 8 + header_length; at < bytes.size(); at += 5) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x01);
    expect_refused(damaged, "data byte " + std::to_string(at));
  }
  std::string edited = bytes;
  edited.replace(edited.find("\"0.5\""), 5, "\"0.6\"");
  expect_refused(edited, "metadata value");
  edited = bytes;
  edited.replace(edited.find("[2,4]"), 5, "[4,2]");
  expect_refused(edited, "shape");

  std::string repadded = bytes;  // the header's closing brace moved into the padding: same content
  const size_t brace = repadded.rfind('}', 8 + header_length - 1);
  ASSERT_LT(brace + 1, 8 + header_length) << "the header has no padding to move the brace into";
  {
    repadded[brace] = ' ';
    repadded[8 + header_length - 1] = '}';
    write_bytes(path("repadded.safetensors"), repadded);
    EXPECT_NO_THROW(SafetensorsFile::open(path("repadded.safetensors")));
  }
  write_safetensors(path("unsealed.safetensors"),
                    R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"__metadata__":{"tau":"0.5"}})",
                    std::string(8, '\0'));
  EXPECT_EQ(SafetensorsFile::open(path("unsealed.safetensors"))->metadata().at("tau"), "0.5");
}

// tests/fuzz/make_corpus.py writes a file sealed by its own Python implementation of kvc.checksum: the
// reader verifies it (the two agree on the header's canonical form and the hash), and refuses any one
// byte of its data changed.
TEST_F(SafetensorsTest, AChecksumComputedByAnotherImplementationVerifies) {
  const std::string sealed = std::string(KVC_SOURCE_DIR) + "/tests/fuzz/corpus/safetensors/sealed.safetensors";
  const auto st = SafetensorsFile::open(sealed);
  EXPECT_EQ(st->metadata(),
            (std::map<std::string, std::string>{{"format", "kvc-bases"}, {"model", "m"}, {"tau", "0.5"}}));
  EXPECT_EQ(read_as<float>(st->data("layers.0.k.U"), 6), (std::vector<float>{0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -4.5f}));
  EXPECT_EQ(read_as<int64_t>(st->data("steps"), 1)[0], 7);
  std::ifstream in(sealed, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (size_t at = bytes.size() - 44; at < bytes.size(); ++at) {
    std::string damaged = bytes;
    damaged[at] = static_cast<char>(damaged[at] ^ 0x80);
    write_bytes(path("damaged.safetensors"), damaged);
    expect_error([&] { SafetensorsFile::open(path("damaged.safetensors")); }, "fails its checksum");
  }
}

TEST_F(SafetensorsTest, WriteReplacesAnExistingFile) {
  const float first = 1.0f, second = 2.0f;
  SafetensorsWriter a;
  a.add("x", DType::F32, {1}, &first, 4);
  a.write(path("m.safetensors"));
  SafetensorsWriter b;
  b.add("y", DType::F32, {1}, &second, 4);
  b.write(path("m.safetensors"));
  const auto st = SafetensorsFile::open(path("m.safetensors"));
  EXPECT_EQ(st->names(), std::vector<std::string>{"y"});
  EXPECT_TRUE(st->metadata().empty());
  EXPECT_EQ(read_as<float>(st->data("y"), 1)[0], 2.0f);
}

TEST_F(SafetensorsTest, EmptyWriterWritesAReadableFile) {
  SafetensorsWriter().write(path("none.safetensors"));
  const auto st = SafetensorsFile::open(path("none.safetensors"));
  EXPECT_TRUE(st->names().empty());
  EXPECT_EQ(st->file_size() % 8, 0u);
}

TEST_F(SafetensorsTest, WriterRejectsBadTensors) {
  const std::vector<float> four(4, 1.0f);
  SafetensorsWriter writer;
  writer.add("w", DType::F32, {4}, four.data(), 16);
  expect_error([&] { writer.add("w", DType::F32, {4}, four.data(), 16); }, "added twice");
  expect_error([&] { writer.add("v", DType::F32, {4}, four.data(), 15); }, "needs 16");
  expect_error([&] { writer.add("v", DType::F16, {2, 3}, four.data(), 16); }, "needs 12");
  expect_error([&] { writer.add("v", DType::F32, {-4}, four.data(), 16); }, "negative");
  expect_error([&] { writer.add("__metadata__", DType::F32, {4}, four.data(), 16); }, "reserved");
  expect_error([&] { writer.add("v", DType::F32, {4}, nullptr, 16); }, "null");
}

TEST_F(SafetensorsTest, WriteIntoMissingFolderIsAnError) {
  const float value = 1.0f;
  SafetensorsWriter writer;
  writer.add("x", DType::F32, {1}, &value, 4);
  expect_error([&] { writer.write(path("no/such/folder/m.safetensors")); }, "cannot write");
}

TEST_F(SafetensorsTest, WriteRejectsInvalidUtf8Names) {
  const float value = 1.0f;
  SafetensorsWriter writer;
  writer.add("bad\xff", DType::F32, {1}, &value, 4);
  expect_error([&] { writer.write(path("m.safetensors")); }, "UTF-8");
  EXPECT_FALSE(fs::exists(path("m.safetensors")));
}

// ---- The real model file -------------------------------------------------------------------------

TEST(Stories260KTest, ReadsTheHuggingFaceLayout) {
  const auto st = SafetensorsFile::open(kStories + "/model.safetensors");
  EXPECT_EQ(st->file_size(), 1045016u);
  EXPECT_EQ(st->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"source", "stories260K.bin"}}));

  // 5 layers of 9 tensors, the embedding and the final norm; lm_head is tied to the embedding.
  EXPECT_EQ(st->names().size(), 47u);
  EXPECT_FALSE(st->contains("lm_head.weight"));
  EXPECT_FALSE(st->contains("model.layers.5.input_layernorm.weight"));

  const TensorInfo& embed = st->info("model.embed_tokens.weight");
  EXPECT_EQ(embed.dtype, DType::F32);
  EXPECT_EQ(embed.shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(embed.begin, 0u);
  EXPECT_EQ(embed.end, 131072u);
  const std::vector<float> embed_head = read_as<float>(st->data("model.embed_tokens.weight"), 4);
  EXPECT_FLOAT_EQ(embed_head[0], -0.29474878311157227f);
  EXPECT_FLOAT_EQ(embed_head[1], 0.5618956089019775f);
  EXPECT_FLOAT_EQ(embed_head[2], 0.1754225343465805f);
  EXPECT_FLOAT_EQ(embed_head[3], 0.34057360887527466f);

  const std::vector<float> norm_head = read_as<float>(st->data("model.norm.weight"), 2);
  EXPECT_FLOAT_EQ(norm_head[0], 2.4583089351654053f);
  EXPECT_FLOAT_EQ(norm_head[1], 1.3673226833343506f);
  EXPECT_EQ(st->info("model.norm.weight").end, 1040128u);

  for (int layer = 0; layer < 5; ++layer) {
    const std::string prefix = "model.layers." + std::to_string(layer);
    EXPECT_EQ(st->info(prefix + ".self_attn.q_proj.weight").shape, (std::vector<int64_t>{64, 64}));
    EXPECT_EQ(st->info(prefix + ".self_attn.k_proj.weight").shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(st->info(prefix + ".self_attn.v_proj.weight").shape, (std::vector<int64_t>{32, 64}));
    EXPECT_EQ(st->info(prefix + ".mlp.gate_proj.weight").shape, (std::vector<int64_t>{172, 64}));
    EXPECT_EQ(st->info(prefix + ".mlp.down_proj.weight").shape, (std::vector<int64_t>{64, 172}));
    EXPECT_EQ(st->info(prefix + ".input_layernorm.weight").shape, (std::vector<int64_t>{64}));
  }
  expect_error([&] { st->info("lm_head.weight"); }, "tensor 'lm_head.weight' not found in '" + st->path() + "'");
}

TEST(Stories260KTest, OpensAsASingleFileCheckpoint) {
  const Checkpoint checkpoint = Checkpoint::open_dir(kStories);
  EXPECT_EQ(checkpoint.names().size(), 47u);
  EXPECT_TRUE(checkpoint.contains("model.norm.weight"));
  EXPECT_EQ(checkpoint.info("model.embed_tokens.weight").shape, (std::vector<int64_t>{512, 64}));
  EXPECT_FLOAT_EQ(read_as<float>(checkpoint.data("model.embed_tokens.weight"), 1)[0], -0.29474878311157227f);
  EXPECT_EQ(checkpoint.file_of("model.norm.weight"), checkpoint.file_of("model.embed_tokens.weight"));
  expect_error([&] { checkpoint.info("lm_head.weight"); }, "tensor 'lm_head.weight' not found in checkpoint");
}

// ---- Sharded checkpoints ---------------------------------------------------------------------------

class CheckpointTest : public SafetensorsTest {
 protected:
  // Two shards: a and b in the first, c in the second.
  void write_shards() {
    SafetensorsWriter first;
    first.add("a", DType::F32, {2}, a_.data(), 8);
    first.add("b", DType::I32, {3}, b_.data(), 12);
    first.write(path("model-00001-of-00002.safetensors"));
    SafetensorsWriter second;
    second.add("c", DType::F64, {1, 2}, c_.data(), 16);
    second.write(path("model-00002-of-00002.safetensors"));
  }
  void write_index(const std::string& text) { write_bytes(path("model.safetensors.index.json"), text); }

  const std::vector<float> a_ = {1.0f, 2.0f};
  const std::vector<int32_t> b_ = {7, -8, 9};
  const std::vector<double> c_ = {0.25, -0.75};
  const std::string good_index_ = R"({"metadata": {"total_size": 36}, "weight_map": {
      "a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors",
      "c": "model-00002-of-00002.safetensors"}})";
};

TEST_F(CheckpointTest, ReadsTensorsAcrossShards) {
  write_shards();
  write_index(good_index_);
  std::shared_ptr<SafetensorsFile> kept;
  {
    const Checkpoint checkpoint = Checkpoint::open_dir(dir_);
    EXPECT_EQ(checkpoint.names(), (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(checkpoint.info("b").dtype, DType::I32);
    EXPECT_EQ(checkpoint.info("c").shape, (std::vector<int64_t>{1, 2}));
    EXPECT_EQ(read_as<float>(checkpoint.data("a"), 2), a_);
    EXPECT_EQ(read_as<int32_t>(checkpoint.data("b"), 3), b_);
    EXPECT_EQ(read_as<double>(checkpoint.data("c"), 2), c_);
    EXPECT_EQ(checkpoint.file_of("a"), checkpoint.file_of("b"));  // one mapping per shard
    EXPECT_NE(checkpoint.file_of("a"), checkpoint.file_of("c"));
    EXPECT_EQ(checkpoint.file_of("c")->path(), path("model-00002-of-00002.safetensors"));
    EXPECT_FALSE(checkpoint.contains("d"));
    kept = checkpoint.file_of("c");
  }
  // The shard outlives the checkpoint through file_of().
  EXPECT_EQ(read_as<double>(kept->data("c"), 2), c_);
}

TEST_F(CheckpointTest, SingleFileWinsOverIndex) {
  write_shards();
  write_index(good_index_);
  const float only = 5.0f;
  SafetensorsWriter single;
  single.add("only", DType::F32, {1}, &only, 4);
  single.write(path("model.safetensors"));
  EXPECT_EQ(Checkpoint::open_dir(dir_).names(), std::vector<std::string>{"only"});
}

TEST_F(CheckpointTest, NonFiniteWeightIsRefusedNamingTheTensor) {
  const std::vector<float> weights = {1.0f, std::numeric_limits<float>::quiet_NaN()};
  SafetensorsWriter single;
  single.add("model.norm.weight", DType::F32, {2}, weights.data(), 8);
  single.write(path("model.safetensors"));
  expect_error([&] { Checkpoint::open_dir(dir_); }, "tensor 'model.norm.weight' holds a non-finite value");
}

TEST_F(CheckpointTest, NonFiniteWeightInAShardIsRefused) {
  write_shards();
  const std::vector<double> infinite = {0.5, -std::numeric_limits<double>::infinity()};
  SafetensorsWriter second;
  second.add("c", DType::F64, {1, 2}, infinite.data(), 16);
  second.write(path("model-00002-of-00002.safetensors"));
  write_index(good_index_);
  expect_error([&] { Checkpoint::open_dir(dir_); }, "model-00002-of-00002.safetensors': tensor 'c' holds a non-finite");
}

TEST_F(CheckpointTest, FolderWithoutModelFilesIsAnError) {
  expect_error([&] { Checkpoint::open_dir(dir_); }, "neither model.safetensors nor model.safetensors.index.json");
}

TEST_F(CheckpointTest, MissingFolderIsAnError) {
  expect_error([&] { Checkpoint::open_dir(path("absent")); }, "not a folder");
}

TEST_F(CheckpointTest, MalformedIndexIsAnError) {
  write_shards();
  write_index(R"({"weight_map": {"a": )");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "not valid JSON");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "model.safetensors.index.json");
}

TEST_F(CheckpointTest, IndexThatIsNotAnObjectIsAnError) {
  write_index("[1, 2]");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "not a JSON object");
}

TEST_F(CheckpointTest, IndexWithoutWeightMapIsAnError) {
  write_shards();
  write_index(R"({"metadata": {"total_size": 36}})");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "missing 'weight_map'");
}

TEST_F(CheckpointTest, WeightMapEntryNotAStringIsAnError) {
  write_shards();
  write_index(R"({"weight_map": {"a": 1}})");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "entry of 'a' is not a string");
}

TEST_F(CheckpointTest, MissingShardIsAnError) {
  write_shards();
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "z": "model-00003.safetensors"}})");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "model-00003.safetensors' (listed for tensor 'z') is missing");
}

TEST_F(CheckpointTest, TensorAbsentFromItsShardIsAnError) {
  write_shards();
  write_index(R"({"weight_map": {"a": "model-00001-of-00002.safetensors", "c": "model-00001-of-00002.safetensors"}})");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "tensor 'c' is listed but absent from its shard");
}

TEST_F(CheckpointTest, CorruptShardIsAnErrorNamingTheShard) {
  write_shards();
  write_bytes(path("model-00002-of-00002.safetensors"), "tiny");
  write_index(good_index_);
  expect_error([&] { Checkpoint::open_dir(dir_); }, "model-00002-of-00002.safetensors': file too short");
}

// ---- Files that are not safetensors at all ----------------------------------------------------------

TEST_F(SafetensorsTest, MissingFileIsAnError) {
  expect_error([&] { SafetensorsFile::open(path("absent.safetensors")); }, "file not found");
  expect_error([&] { SafetensorsFile::open(path("absent.safetensors")); }, "absent.safetensors");
}

TEST_F(SafetensorsTest, FolderIsAnError) {
  expect_error([&] { SafetensorsFile::open(dir_); }, "is a folder");
}

TEST_F(SafetensorsTest, EmptyFileIsAnError) {
  write_bytes(path("empty.safetensors"), "");
  expect_error([&] { SafetensorsFile::open(path("empty.safetensors")); }, "file too short");
}

TEST_F(SafetensorsTest, FileShorterThanTheLengthPrefixIsAnError) {
  write_bytes(path("short.safetensors"), std::string("\x02\x00\x00\x00\x00\x00\x00", 7));
  expect_error([&] { SafetensorsFile::open(path("short.safetensors")); }, "file too short");
}

// ---- The header length -------------------------------------------------------------------------------

TEST_F(SafetensorsTest, HeaderLengthZeroIsAnError) {
  write_bytes(path("h.safetensors"), le64(0) + "{}");
  expect_error([&] { SafetensorsFile::open(path("h.safetensors")); }, "header length is 0");
}

TEST_F(SafetensorsTest, HeaderLengthOverTheLimitIsAnError) {
  write_bytes(path("h.safetensors"), le64(100'000'001) + "{}");
  expect_error([&] { SafetensorsFile::open(path("h.safetensors")); }, "header length 100000001 exceeds");
  write_bytes(path("h.safetensors"), le64(UINT64_MAX) + "{}");
  expect_error([&] { SafetensorsFile::open(path("h.safetensors")); }, "exceeds");
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEndIsAnError) {
  write_bytes(path("h.safetensors"), le64(3) + "{}");
  expect_error([&] { SafetensorsFile::open(path("h.safetensors")); }, "header length 3 runs past the end");
}

// ---- Header contents: one case per malformation ---------------------------------------------------------

struct BadHeader {
  const char* case_name;
  std::string header;
  std::string data;
  std::string needle;
};

// Names the case instead of dumping the struct's bytes when a case fails.
void PrintTo(const BadHeader& bad, std::ostream* os) { *os << bad.case_name; }

class BadHeaderTest : public SafetensorsTest, public ::testing::WithParamInterface<BadHeader> {};

TEST_P(BadHeaderTest, IsRejectedWithAClearMessage) {
  expect_open_error(GetParam().header, GetParam().data, GetParam().needle);
}

const std::string k16Bytes(16, '\x01');

INSTANTIATE_TEST_SUITE_P(
    Malformed, BadHeaderTest,
    ::testing::Values(
        BadHeader{"InvalidJson", R"({"a": {"dtype": "F32",)", "", "header is not valid JSON"},
        BadHeader{"BinaryGarbage", std::string("\xff\xfe\x00\x01", 4), "", "header is not valid JSON"},
        BadHeader{"NotAnObject", R"([1, 2, 3])", "", "header is not a JSON object"},
        BadHeader{"EntryNotAnObject", R"({"a": [0, 16]})", k16Bytes, "tensor 'a': entry is not a JSON object"},
        BadHeader{"MissingDtype", R"({"a": {"shape": [4], "data_offsets": [0, 16]}})", k16Bytes, "missing 'dtype'"},
        BadHeader{"DtypeNotString", R"({"a": {"dtype": 4, "shape": [4], "data_offsets": [0, 16]}})", k16Bytes,
                  "'dtype' is not a string"},
        BadHeader{"UnknownDtype", R"({"a": {"dtype": "F8_E5M2", "shape": [16], "data_offsets": [0, 16]}})", k16Bytes,
                  "tensor 'a': unknown dtype 'F8_E5M2'"},
        BadHeader{"MissingShape", R"({"a": {"dtype": "F32", "data_offsets": [0, 16]}})", k16Bytes, "missing 'shape'"},
        BadHeader{"ShapeNotArray", R"({"a": {"dtype": "F32", "shape": 4, "data_offsets": [0, 16]}})", k16Bytes,
                  "'shape' is not an array"},
        BadHeader{"ShapeFloatDim", R"({"a": {"dtype": "F32", "shape": [4.0], "data_offsets": [0, 16]}})", k16Bytes,
                  "non-integer"},
        BadHeader{"ShapeStringDim", R"({"a": {"dtype": "F32", "shape": ["4"], "data_offsets": [0, 16]}})", k16Bytes,
                  "non-integer"},
        BadHeader{"NegativeDim", R"({"a": {"dtype": "F32", "shape": [-2, -2], "data_offsets": [0, 16]}})", k16Bytes,
                  "negative dim"},
        BadHeader{"DimBeyondInt64",
                  R"({"a": {"dtype": "U8", "shape": [9223372036854775808], "data_offsets": [0, 16]}})", k16Bytes,
                  "dim too large"},
        BadHeader{"MissingOffsets", R"({"a": {"dtype": "F32", "shape": [4]}})", k16Bytes, "missing 'data_offsets'"},
        BadHeader{"OffsetsNotArray", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": 16}})", k16Bytes,
                  "not two non-negative integers"},
        BadHeader{"OffsetsWrongCount", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 8, 16]}})", k16Bytes,
                  "not two non-negative integers"},
        BadHeader{"OffsetsNegative", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [-16, 0]}})", k16Bytes,
                  "not two non-negative integers"},
        BadHeader{"OffsetsNotIntegers", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": ["0", 16]}})", k16Bytes,
                  "not two non-negative integers"},
        BadHeader{"OffsetsBeginAfterEnd", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [16, 0]}})", k16Bytes,
                  "begin > end"},
        BadHeader{"EndBeyondData", R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})",
                  std::string(12, '\0'), "end 16 is beyond the data section (12 bytes)"},
        BadHeader{
            "HugeEndBeyondData",
            R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [18446744073709551614, 18446744073709551615]}})",
            k16Bytes, "is beyond the data section"},
        BadHeader{"ByteLengthMismatch", R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 16]}})", k16Bytes,
                  "span 16 bytes but shape [3] of F32 needs 12"},
        BadHeader{"ShapeProductOverflows",
                  R"({"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 16], "data_offsets": [0, 16]}})",
                  k16Bytes, "too large"},
        BadHeader{"ByteCountOverflows",
                  R"({"a": {"dtype": "F64", "shape": [4611686018427387904], "data_offsets": [0, 16]}})", k16Bytes,
                  "too large"},
        BadHeader{"Overlap",
                  R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                  k16Bytes, "tensors 'a' [0, 12) and 'b' [8, 16) overlap"},
        BadHeader{"OverlapInsideALongerTensor",
                  R"({"a": {"dtype": "U8", "shape": [16], "data_offsets": [0, 16]},
                      "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]},
                      "c": {"dtype": "U8", "shape": [2], "data_offsets": [10, 12]}})",
                  k16Bytes, "overlap"},
        BadHeader{"SameOffsets",
                  R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                      "b": {"dtype": "I32", "shape": [4], "data_offsets": [0, 16]}})",
                  k16Bytes, "overlap"},
        BadHeader{"DuplicateName",
                  R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                      "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                  k16Bytes, "duplicate key 'a'"},
        BadHeader{"GapBetweenTensors",
                  R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                      "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
                  k16Bytes, "data bytes [4, 8) before tensor 'b' belong to no tensor"},
        BadHeader{"GapBeforeFirstTensor", R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [4, 16]}})", k16Bytes,
                  "data bytes [0, 4) before tensor 'a' belong to no tensor"},
        BadHeader{"BytesAfterLastTensor", R"({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 12]}})", k16Bytes,
                  "4 data bytes after the last tensor belong to no tensor"},
        BadHeader{"DataWithoutTensors", R"({})", k16Bytes, "16 data bytes after the last tensor"},
        BadHeader{"MetadataNotObject", R"({"__metadata__": "pt"})", "", "__metadata__ is not a JSON object"},
        BadHeader{"MetadataValueNotString", R"({"__metadata__": {"format": "pt", "step": 3}})", "",
                  "__metadata__ value of 'step' is not a string"}),
    [](const ::testing::TestParamInfo<BadHeader>& info) { return std::string(info.param.case_name); });

// ---- What the format allows -------------------------------------------------------------------------

TEST_F(SafetensorsTest, EmptyTensorsAndHeaderPaddingAreAccepted) {
  // b at [0, 8), a at [8, 12), and empty tensors anywhere (even inside b): they occupy no bytes.
  std::string data(12, '\0');
  const float a = 42.0f;
  const double b = -1.25;
  std::memcpy(&data[0], &b, 8);
  std::memcpy(&data[8], &a, 4);
  const std::string header =
      R"({"b": {"dtype": "F64", "shape": [1], "data_offsets": [0, 8]},
          "a": {"dtype": "F32", "shape": [], "data_offsets": [8, 12]},
          "e": {"dtype": "F16", "shape": [0], "data_offsets": [4, 4]},
          "z": {"dtype": "I8", "shape": [3, 0], "data_offsets": [12, 12]},
          "__metadata__": {}}     )";
  write_safetensors(path("ok.safetensors"), header, data);
  const auto st = SafetensorsFile::open(path("ok.safetensors"));
  EXPECT_EQ(st->names(), (std::vector<std::string>{"a", "b", "e", "z"}));
  EXPECT_EQ(read_as<float>(st->data("a"), 1)[0], a);
  EXPECT_EQ(read_as<double>(st->data("b"), 1)[0], b);
  EXPECT_EQ(st->info("e").numel(), 0);
  EXPECT_EQ(st->info("z").nbytes(), 0u);
  EXPECT_TRUE(st->metadata().empty());
}

// ---- Non-finite values ----------------------------------------------------------------------------

struct NonFiniteCase {
  const char* case_name;
  const char* dtype;
  std::string bits;  // one element's little-endian bytes
};

void PrintTo(const NonFiniteCase& c, std::ostream* os) { *os << c.case_name; }

class NonFiniteTest : public SafetensorsTest, public ::testing::WithParamInterface<NonFiniteCase> {};

TEST_P(NonFiniteTest, IsFoundAndNamesTheTensor) {
  const NonFiniteCase& c = GetParam();
  const size_t element = c.bits.size();
  // 5000 finite zeros then the bad element: past the first scan block, so the blocked scan is exercised.
  const size_t count = 5001;
  std::string data(element * count, '\0');
  data.replace(element * (count - 1), element, c.bits);
  const std::string header = std::string(R"({"ok": {"dtype": ")") + c.dtype +
                             R"(", "shape": [0], "data_offsets": [0, 0]},
      "w": {"dtype": ")" + c.dtype +
                             R"(", "shape": [)" + std::to_string(count) + R"(], "data_offsets": [0, )" +
                             std::to_string(data.size()) + "]}}";
  write_safetensors(path("nf.safetensors"), header, data);
  const auto st = SafetensorsFile::open(path("nf.safetensors"));
  st->check_finite("ok");
  expect_error([&] { st->check_finite("w"); }, "tensor 'w' holds a non-finite value (NaN or infinity) at element 5000");
  expect_error([&] { st->check_all_finite(); }, path("nf.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(
    AllFloatTypes, NonFiniteTest,
    ::testing::Values(NonFiniteCase{"F32NaN", "F32", std::string("\x00\x00\xc0\x7f", 4)},
                      NonFiniteCase{"F32Inf", "F32", std::string("\x00\x00\x80\x7f", 4)},
                      NonFiniteCase{"F32MinusInf", "F32", std::string("\x00\x00\x80\xff", 4)},
                      NonFiniteCase{"F64NaN", "F64", std::string("\x00\x00\x00\x00\x00\x00\xf8\x7f", 8)},
                      NonFiniteCase{"F16Inf", "F16", std::string("\x00\x7c", 2)},
                      NonFiniteCase{"BF16NaN", "BF16", std::string("\xc0\x7f", 2)}),
    [](const ::testing::TestParamInfo<NonFiniteCase>& info) { return std::string(info.param.case_name); });

TEST_F(SafetensorsTest, FiniteExtremesAndIntegersPass) {
  const std::vector<float> values = {0.0f, -0.0f, 3.4e38f, -3.4e38f, 1e-45f};
  const std::vector<int32_t> ints = {0x7f800000, -1};  // the bit pattern of +inf, as an integer
  SafetensorsWriter writer;
  writer.add("f", DType::F32, {5}, values.data(), 20);
  writer.add("i", DType::I32, {2}, ints.data(), 8);
  writer.write(path("ok.safetensors"));
  SafetensorsFile::open(path("ok.safetensors"))->check_all_finite();
}

TEST_F(SafetensorsTest, EmptyHeaderObjectIsAFileWithNoTensors) {
  write_safetensors(path("none.safetensors"), "{}", "");
  const auto st = SafetensorsFile::open(path("none.safetensors"));
  EXPECT_TRUE(st->names().empty());
  EXPECT_FALSE(st->contains("x"));
  expect_error([&] { st->data("x"); }, "tensor 'x' not found");
}

// Found by tests/fuzz (fuzz_safetensors): a number too large for any JSON type made nlohmann throw
// out_of_range, which escaped as an uncaught exception instead of a kvc::Error.
TEST_F(SafetensorsTest, NumberOverflowInTheHeaderIsAnError) {
  write_safetensors(path("big.safetensors"), R"({"a":{"dtype":"F32","shape":[1e999],"data_offsets":[0,4]}})",
                    std::string(4, '\0'));
  expect_error([&] { SafetensorsFile::open(path("big.safetensors")); }, "header is not valid JSON");
  expect_error(
      [&] {
        SafetensorsFile::open(std::string(KVC_SOURCE_DIR) +
                              "/tests/fuzz/regressions/safetensors/number-overflow.safetensors");
      },
      "header is not valid JSON");
}

TEST_F(CheckpointTest, NumberOverflowInTheIndexIsAnError) {
  write_shards();
  write_index(R"({"metadata": {"total_size": 1e999}, "weight_map": {"a": "model-00001-of-00002.safetensors"}})");
  expect_error([&] { Checkpoint::open_dir(dir_); }, "not valid JSON");
}

}  // namespace
