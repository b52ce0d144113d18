// GGUF weights kept in their blocks (model/linear_weight.h) against the same file dequantized at load
// (--dtype float32), on the random-weight Llama and Qwen2 files of data/gguf/blocks/
// (scripts/make_gguf_block_models.py: q, k, v in three formats, the MLP in two more, F16 beside them),
// and on the real models when installed; and the one-line errors of files the block kernels cannot read.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "io/gguf_reader.h"
#include "kernels/block_isa.h"
#include "kernels/block_matvec.h"
#include "model/llama_model.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

std::string blocks_model(const std::string& arch) {
  return kvc::test::repo_data_dir() + "/gguf/blocks/" + arch + "-blocks.gguf";
}

kvc::LoadOptions with_dtype(const std::string& dtype) {
  kvc::LoadOptions o;
  o.dtype = dtype;
  return o;
}

// Logits of every position of `prompt` (a prefill), then of each of `steps` one-token decode steps, in
// one cache. The decoded tokens are fixed, so that two models are fed the same ones.
at::Tensor run(const kvc::LlamaModel& model, const std::vector<int>& prompt, int steps, kvc::KVCache cache) {
  kvc::ForwardOptions all;
  all.all_logits = true;
  std::vector<at::Tensor> rows;
  if (!prompt.empty()) rows.push_back(model.forward(prompt, cache, all));
  for (int s = 0; s < steps; ++s) rows.push_back(model.forward({5 + 11 * s}, cache, {}));
  return at::cat(rows);
}

std::vector<int> test_prompt(int n, int first) {
  std::vector<int> prompt = {first};
  for (int i = 1; i < n; ++i) prompt.push_back(3 + (i * 37) % 500);
  return prompt;
}

// The block kernels' form that takes the fp32 input as it is: with it the two loads must agree to fp32
// rounding, which checks how the loader laid out the blocks (segments, q/k row order, biases, the
// embedding's rows) apart from the input's rounding.
struct FloatForm {
  FloatForm() {
    for (kvc::BlockType t : kTypes) kvc::set_block_kernel_form(t, kvc::BlockKernelForm::Float);
  }
  ~FloatForm() {
    for (kvc::BlockType t : kTypes) kvc::set_block_kernel_form(t, kvc::BlockKernelForm::Integer);
  }
  static constexpr kvc::BlockType kTypes[] = {kvc::BlockType::Q4_0, kvc::BlockType::Q4_1, kvc::BlockType::Q5_0,
                                              kvc::BlockType::Q5_1, kvc::BlockType::Q8_0, kvc::BlockType::Q4_K,
                                              kvc::BlockType::Q5_K, kvc::BlockType::Q6_K};
};

class GgufBlocks : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { at::set_num_threads(2); }
};

TEST_P(GgufBlocks, BlockWeightsMatchTheDequantizedModel) {
  const std::string path = blocks_model(GetParam());
  const auto blocks = kvc::LlamaModel::load(path), dense = kvc::LlamaModel::load(path, with_dtype("float32"));
  EXPECT_TRUE(blocks->has_block_weights());
  EXPECT_FALSE(dense->has_block_weights());
  EXPECT_NE(blocks->weight_format().find("Q5_1"), std::string::npos) << blocks->weight_format();
  EXPECT_EQ(dense->weight_format(), "Float");
  // llama.cpp's default cache for a quantized file; the dequantized reference keeps fp32.
  EXPECT_EQ(blocks->cache_types().keys, at::kHalf);
  EXPECT_EQ(blocks->cache_types().values, at::kHalf);
  EXPECT_EQ(dense->cache_types().keys, at::kFloat);
  EXPECT_EQ(blocks->parameter_count(), dense->parameter_count());
  EXPECT_LT(blocks->weight_bytes(), dense->weight_bytes() / 3);

  const kvc::CacheTypes f32{at::kFloat, at::kFloat};
  const at::Tensor reference = run(*dense, test_prompt(40, 1), 6, dense->typed_cache(f32));
  const double scale = reference.abs().max().item<double>();
  EXPECT_GT(scale, 1.0);
  if (kvc::best_block_isa() == kvc::BlockIsa::Avx512Vnni) {
    // Decode steps only (the prefill's panels always round the input), in the same f32 cache.
    const FloatForm exact;
    const at::Tensor a = run(*blocks, {}, 12, blocks->typed_cache(f32)),
                     b = run(*dense, {}, 12, dense->typed_cache(f32));
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-5 * scale) << "the float form of the block kernels";
  }
  // The integer kernels round each input value to 8 bits (at most half its block's step). These
  // random-weight models have one 32-value block per row, and their logits (up to ~8) move by up to
  // 0.5 (measured: 0.48 Llama, 0.25 Qwen2); a q/k row order undone wrongly moved them by more than 2.
  const at::Tensor a = run(*blocks, test_prompt(40, 1), 6, blocks->typed_cache(f32));
  const double diff = (a - reference).abs().max().item<double>();
  std::printf("%s: max abs logit diff %.3g (logits up to %.3g)\n", GetParam().c_str(), diff, scale);
  EXPECT_LT(diff, 1.0);
  // The default f16 cache on top.
  EXPECT_LT((run(*blocks, test_prompt(40, 1), 6, blocks->new_cache()) - reference).abs().max().item<double>(), 1.0);
}

INSTANTIATE_TEST_SUITE_P(Architectures, GgufBlocks, ::testing::Values("llama", "qwen2"));

// The real models on a text: the distributions of the blocks' prefill and decode steps against the
// dequantized model's (SmolLM2's q/k rows are in llama.cpp's order; Gemma 3 mixes four formats). The
// blocks' integer products round the input to 8 bits; measured: mean KL 0.003 nats on both models.
void compare_real(const std::string& path, double max_mean_kl) {
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is not installed (scripts/setup.sh)";
  at::set_num_threads(2);
  const auto blocks = kvc::LlamaModel::load(path), dense = kvc::LlamaModel::load(path, with_dtype("float32"));
  const kvc::Tokenizer tok = kvc::Tokenizer::load(path);
  std::ifstream in(kvc::test::data_file("wikitext2/wiki.test.raw"), std::ios::binary);
  std::string text(3000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<int> ids = tok.encode_prompt(text);
  ids.resize(140);
  const std::vector<int> prompt(ids.begin(), ids.begin() + 120), rest(ids.begin() + 120, ids.end());
  const kvc::CacheTypes f32{at::kFloat, at::kFloat};
  const auto logits = [&](const kvc::LlamaModel& m) {
    kvc::KVCache cache = m.typed_cache(f32);
    kvc::ForwardOptions all;
    all.all_logits = true;
    std::vector<at::Tensor> rows = {m.forward(prompt, cache, all)};
    for (int id : rest) rows.push_back(m.forward({id}, cache, {}));
    return at::cat(rows).log_softmax(1);
  };
  const at::Tensor p = logits(*dense), q = logits(*blocks);
  const at::Tensor kl = (p.exp() * (p - q)).sum(1);
  const double agree = (p.argmax(1) == q.argmax(1)).to(at::kFloat).mean().item<double>();
  std::printf(
      "%s: KL(dequantized || blocks) mean %.3g, max %.3g nats over %lld positions (prefill %zu, decode %zu); "
      "argmax agrees at %.1f%%\n",
      path.c_str(), kl.mean().item<double>(), kl.max().item<double>(), static_cast<long long>(p.size(0)), prompt.size(),
      rest.size(), 100 * agree);
  EXPECT_LT(kl.mean().item<double>(), max_mean_kl);
  EXPECT_GE(agree, 0.9);
}

TEST(GgufBlocksReal, SmolLM2MatchesTheDequantizedModel) { compare_real(kvc::test::smollm2_gguf(), 0.01); }
TEST(GgufBlocksReal, Gemma3MatchesTheDequantizedModel) { compare_real(kvc::test::gemma3_gguf(), 0.01); }

// --- Files the block kernels cannot read: one line naming the tensor. ---

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string write_temp(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The file with tensor `name`'s ggml type id replaced.
std::string with_type(std::string file, const std::string& name, uint32_t type) {
  std::string key(8, '\0');
  const uint64_t length = name.size();
  std::memcpy(key.data(), &length, 8);
  key += name;
  const size_t at = file.find(key);
  EXPECT_NE(at, std::string::npos) << name;
  size_t p = at + key.size();
  uint32_t dims;
  std::memcpy(&dims, &file[p], 4);
  p += 4 + 8 * dims;
  std::memcpy(&file[p], &type, 4);
  return file;
}

void expect_one_line_error(const std::string& path, const std::vector<std::string>& needles) {
  try {
    kvc::LlamaModel::load(path);
    FAIL() << "loaded " << path;
  } catch (const kvc::Error& e) {
    const std::string what = e.what();
    for (const std::string& n : needles) EXPECT_NE(what.find(n), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(GgufBlocksErrors, BlockTypeWithoutKernelNamesTheTensor) {
  // IQ4_NL: 32 values in 18 bytes, Q4_0's size, so the file stays well-formed.
  const std::string path =
      write_temp("kvc_blocks_iq4.gguf", with_type(read_file(blocks_model("llama")), "blk.1.attn_q.weight", 20));
  expect_one_line_error(path, {"blk.1.attn_q.weight", "IQ4_NL"});
}

TEST(GgufBlocksErrors, RowNotAWholeNumberOfBlocksNamesTheTensor) {
  // Q4_K's blocks hold 256 values; the rows have 32.
  const std::string path =
      write_temp("kvc_blocks_rows.gguf", with_type(read_file(blocks_model("llama")), "blk.0.ffn_up.weight", 12));
  expect_one_line_error(path, {"blk.0.ffn_up.weight", "Q4_K", "not a multiple of its block of 256"});
}

TEST(GgufBlocksErrors, TruncatedBlocksNameTheTensor) {
  const std::string file = read_file(blocks_model("llama"));
  // The tensor whose blocks end the file loses its last 100 bytes.
  const auto info = kvc::gguf::GgufFile::open_metadata(blocks_model("llama"));
  const kvc::gguf::TensorInfo* last = &info->tensors().front();
  for (const auto& t : info->tensors()) last = t.offset > last->offset ? &t : last;
  const std::string path = write_temp("kvc_blocks_truncated.gguf", file.substr(0, file.size() - 100));
  expect_one_line_error(path, {"'" + last->name + "'", "runs past the end of the file"});
}

}  // namespace
