// kvc's Q8_0 / Q4_0 block encoders against gguf.quants (llama.cpp's reference quantizers) on the rows
// scripts/make_gguf_quantize_goldens.py wrote, and its float-to-half rounding against a brute-force
// nearest-even search over every half.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "io/gguf_dequant.h"
#include "io/gguf_quantize.h"
#include "support/paths.h"
#include "util/error.h"

namespace {

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::vector<float> golden_rows() {
  const std::vector<uint8_t> bytes = read_bytes(kvc::test::repo_data_dir() + "/gguf/quantize/rows.f32");
  std::vector<float> x(bytes.size() / sizeof(float));
  std::memcpy(x.data(), bytes.data(), x.size() * sizeof(float));
  return x;
}

class GgufQuantize : public ::testing::TestWithParam<std::pair<const char*, uint32_t>> {};

TEST_P(GgufQuantize, MatchesReferenceByteForByte) {
  const auto [name, type] = GetParam();
  const std::vector<float> x = golden_rows();
  const std::vector<uint8_t> expected =
      read_bytes(kvc::test::repo_data_dir() + "/gguf/quantize/" + std::string(name) + ".blocks");
  ASSERT_GT(x.size(), 0u);
  ASSERT_EQ(expected.size(), kvc::gguf::quantized_bytes(type, x.size()));
  std::vector<uint8_t> got(expected.size());
  kvc::gguf::quantize(type, x.data(), x.size(), got.data());
  const uint64_t block = kvc::gguf::quantized_bytes(type, 32);
  uint64_t differing_blocks = 0;
  for (uint64_t b = 0; b < got.size() / block; ++b) {
    differing_blocks += std::memcmp(got.data() + b * block, expected.data() + b * block, block) != 0;
  }
  EXPECT_EQ(differing_blocks, 0u) << name << ": blocks differing from gguf.quants, of " << got.size() / block;
}

TEST_P(GgufQuantize, RoundTripErrorIsWithinHalfAStep) {
  // Decoding what was encoded lands within about half a quantization step of every finite value: the
  // invariant that makes the format usable as a cache.
  const auto [name, type] = GetParam();
  std::vector<float> x = golden_rows();
  x.resize(64 * 32);  // the standard-normal blocks
  std::vector<uint8_t> blocks(kvc::gguf::quantized_bytes(type, x.size()));
  kvc::gguf::quantize(type, x.data(), x.size(), blocks.data());
  std::vector<float> y(x.size());
  kvc::gguf::dequantize(type, blocks.data(), x.size(), y.data());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
    const float step = type == kvc::gguf::kTypeQ8_0 ? amax / 127 : amax / 8;
    for (int j = 0; j < 32; ++j) {
      // Half a step from rounding the value (Q4_0: a full step, as it clips +8 to +7), plus the scale's
      // rounding to half (relative 2^-11) times the largest integer level (127, or 8).
      const float bound = type == kvc::gguf::kTypeQ8_0 ? step * (0.5f + 127.0f / 2048) : step * (1.0f + 8.0f / 2048);
      EXPECT_LE(std::fabs(y[b * 32 + j] - x[b * 32 + j]), bound) << name << " block " << b << " value " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GgufQuantize,
                         ::testing::Values(std::make_pair("Q8_0", kvc::gguf::kTypeQ8_0),
                                           std::make_pair("Q4_0", kvc::gguf::kTypeQ4_0)),
                         [](const auto& info) { return std::string(info.param.first); });

// The half nearest to f by brute force over all finite halves (ties to the even bit pattern); inf past
// the rounding boundary of the largest half.
uint16_t nearest_half(float f) {
  const double v = std::fabs(static_cast<double>(f));
  if (v >= 65520.0) return static_cast<uint16_t>((std::signbit(f) ? 0x8000 : 0) | 0x7C00);
  uint16_t best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double err = std::fabs(static_cast<double>(kvc::gguf::half_to_float(static_cast<uint16_t>(h))) - v);
    if (err < best_err || (err == best_err && (h & 1) == 0)) {
      best_err = err;
      best = static_cast<uint16_t>(h);
    }
  }
  return static_cast<uint16_t>((std::signbit(f) ? 0x8000 : 0) | best);
}

TEST(GgufQuantize, FloatToHalfRoundsToNearestEven) {
  // Every half converts back to itself; the midpoints between neighbours (exact in float) and the
  // floats just beside them go where a brute-force nearest-even search says.
  std::vector<float> probes;
  for (uint32_t h = 0; h < 0x7C00; h += 1) {
    const float a = kvc::gguf::half_to_float(static_cast<uint16_t>(h));
    ASSERT_EQ(kvc::gguf::float_to_half(a), h);
    ASSERT_EQ(kvc::gguf::float_to_half(-a), h | 0x8000u);
    if (h % 97 == 0 || h < 8 || h > 0x7BF8 || (h & 0x3FF) == 0x3FF) {
      const float mid = (a + kvc::gguf::half_to_float(static_cast<uint16_t>(h + 1))) / 2;
      for (const float p : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)}) probes.push_back(p);
    }
  }
  for (const float p : {1e-9f, 2.9802322e-8f, 65519.99f, 65520.0f, 1e30f}) probes.push_back(p);
  for (const float p : probes) {
    EXPECT_EQ(kvc::gguf::float_to_half(p), nearest_half(p)) << p;
    EXPECT_EQ(kvc::gguf::float_to_half(-p), nearest_half(-p)) << -p;
  }
  EXPECT_EQ(kvc::gguf::float_to_half(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(kvc::gguf::float_to_half(std::nanf("")) & 0x7E00, 0x7E00);  // a quiet NaN
}

TEST(GgufQuantize, RefusesPartialBlocksAndOtherTypes) {
  EXPECT_THROW(kvc::gguf::quantized_bytes(kvc::gguf::kTypeQ8_0, 33), kvc::Error);
  EXPECT_THROW(kvc::gguf::quantized_bytes(12, 256), kvc::Error);  // Q4_K: decoded, not encoded
}

}  // namespace
