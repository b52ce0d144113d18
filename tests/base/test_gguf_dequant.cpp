// kvc's ggml block decoders against gguf.quants (llama.cpp's reference dequantizers) on random blocks
// written by scripts/make_gguf_dequant_goldens.py.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/gguf_dequant.h"
#include "io/gguf_reader.h"
#include "support/paths.h"
#include "util/error.h"

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  const char* name;
  uint32_t type;
};

class GgufDequant : public ::testing::TestWithParam<Case> {};

TEST_P(GgufDequant, MatchesReferenceBitForBit) {
  const Case c = GetParam();
  const std::string base = kvc::test::repo_data_dir() + "/gguf/dequant/" + c.name;
  const std::vector<uint8_t> blocks = read_bytes(base + ".blocks");
  const std::vector<uint8_t> expected_bytes = read_bytes(base + ".f32");
  const uint64_t n = expected_bytes.size() / sizeof(float);
  ASSERT_GT(n, 0u);
  const kvc::gguf::GgmlTypeInfo* info = kvc::gguf::ggml_type_info(c.type);
  ASSERT_NE(info, nullptr);
  ASSERT_EQ(blocks.size(), n / info->block_elements * info->block_bytes);
  std::vector<float> expected(n), got(n);
  std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());
  kvc::gguf::dequantize(c.type, blocks.data(), n, got.data());
  uint64_t identical = 0;
  double max_diff = 0;
  for (uint64_t i = 0; i < n; ++i) {
    identical += std::memcmp(&got[i], &expected[i], sizeof(float)) == 0;
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(got[i] - expected[i])));
  }
  std::printf("%s: %llu/%llu values bit-identical, max abs diff %g\n", c.name,
              static_cast<unsigned long long>(identical), static_cast<unsigned long long>(n), max_diff);
  EXPECT_EQ(identical, n);
}

INSTANTIATE_TEST_SUITE_P(BlockTypes, GgufDequant,
                         ::testing::Values(Case{"F32", 0}, Case{"F16", 1}, Case{"BF16", 30}, Case{"Q4_0", 2},
                                           Case{"Q4_1", 3}, Case{"Q5_0", 6}, Case{"Q5_1", 7}, Case{"Q8_0", 8},
                                           Case{"Q4_K", 12}, Case{"Q5_K", 13}, Case{"Q6_K", 14}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(GgufDequantErrors, UnknownBlockTypeIsOneLine) {
  std::vector<uint8_t> blocks(256);
  std::vector<float> out(256);
  try {
    kvc::gguf::dequantize(16 /* IQ2_XXS */, blocks.data(), 256, out.data());
    FAIL() << "expected an error";
  } catch (const kvc::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("IQ2_XXS"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(GgufDequantErrors, PartialBlockIsRejected) {
  std::vector<uint8_t> blocks(34);
  std::vector<float> out(32);
  EXPECT_THROW(kvc::gguf::dequantize(8 /* Q8_0 */, blocks.data(), 31, out.data()), kvc::Error);
}

}  // namespace
