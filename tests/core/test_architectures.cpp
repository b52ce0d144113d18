// Architecture variants against a brute-force float64 forward (tests/support/naive_llama): grouped-
// query attention, Qwen2 q/k/v biases, Mistral sliding windows, RoPE scaling, tied embeddings,
// sharded checkpoints and half-precision storage.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <fstream>

#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/random_checkpoint.h"
#include "support/naive_llama.h"
#include "support/run_command.h"
#include "util/error.h"

namespace kvc {
namespace {

CheckpointShape tiny_shape(const std::string& model_type) {
  CheckpointShape s;
  s.model_type = model_type;
  s.hidden_size = 32;
  s.intermediate_size = 48;
  s.num_layers = 2;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_dim = 8;
  s.vocab_size = 50;
  s.max_position_embeddings = 64;
  return s;
}

std::string write_tiny(const CheckpointShape& shape, int64_t max_shard_bytes = 0) {
  const std::string dir = test::make_temp_dir("kvc-arch");
  RandomCheckpointOptions options;
  options.seed = 7;
  options.init_std = 0.3;  // large enough that attention is far from uniform
  options.norm_noise = 0.2;
  options.max_shard_bytes = max_shard_bytes;
  write_random_checkpoint(shape, dir, options);
  return dir;
}

const std::vector<int> kTokens = {1, 5, 9, 14, 3, 27, 33, 8, 41, 2, 17, 49, 6, 22, 30, 11};

double max_diff_to_naive(const std::string& dir) {
  at::set_num_threads(1);
  auto model = LlamaModel::load(dir);
  KVCache cache = model->new_cache();
  const at::Tensor logits = model->forward(kTokens, cache).to(at::kDouble);
  const auto naive = test::naive_llama_logits(dir, kTokens);
  double worst = 0;
  for (size_t t = 0; t < naive.size(); ++t)
    for (size_t v = 0; v < naive[t].size(); ++v)
      worst = std::max(worst,
                       std::abs(logits[static_cast<int64_t>(t)][static_cast<int64_t>(v)].item<double>() - naive[t][v]));
  return worst;
}

TEST(Architectures, LlamaWithGroupedQueryAttention) {
  EXPECT_LT(max_diff_to_naive(write_tiny(tiny_shape("llama"))), 1e-4);
}

TEST(Architectures, Qwen2UsesQkvBiases) {
  const std::string dir = write_tiny(tiny_shape("qwen2"));
  EXPECT_TRUE(st::SafetensorsFile::open(dir + "/model.safetensors")->contains("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_LT(max_diff_to_naive(dir), 1e-4);
}

TEST(Architectures, MistralSlidingWindowMasksOldTokens) {
  CheckpointShape shape = tiny_shape("mistral");
  shape.sliding_window = 4;
  const std::string windowed = write_tiny(shape);
  EXPECT_LT(max_diff_to_naive(windowed), 1e-4);
  // The window must matter: the same weights without it give different late logits.
  shape.model_type = "llama";
  shape.sliding_window = 0;
  const std::string full = write_tiny(shape);
  at::set_num_threads(1);
  KVCache c1 = LlamaModel::load(windowed)->new_cache(), c2 = LlamaModel::load(full)->new_cache();
  const at::Tensor a = LlamaModel::load(windowed)->forward(kTokens, c1);
  const at::Tensor b = LlamaModel::load(full)->forward(kTokens, c2);
  EXPECT_LT((a[2] - b[2]).abs().max().item<double>(), 1e-6);  // inside the window: identical
  EXPECT_GT((a[15] - b[15]).abs().max().item<double>(), 1e-3);
}

TEST(Architectures, LinearRopeScaling) {
  CheckpointShape shape = tiny_shape("llama");
  shape.rope_scaling = {{"rope_type", "linear"}, {"factor", 4.0}};
  EXPECT_LT(max_diff_to_naive(write_tiny(shape)), 1e-4);
}

TEST(Architectures, Llama3RopeScaling) {
  CheckpointShape shape = tiny_shape("llama");
  shape.head_dim = 16;
  shape.rope_theta = 500000.0;
  // A short original context puts the head's frequencies in all three bands (kept, blended, scaled).
  shape.rope_scaling = {{"rope_type", "llama3"},
                        {"factor", 8.0},
                        {"low_freq_factor", 1.0},
                        {"high_freq_factor", 4.0},
                        {"original_max_position_embeddings", 64}};
  EXPECT_LT(max_diff_to_naive(write_tiny(shape)), 1e-4);
}

TEST(Architectures, TiedEmbeddings) {
  CheckpointShape shape = tiny_shape("llama");
  shape.tie_word_embeddings = true;
  const std::string dir = write_tiny(shape);
  EXPECT_FALSE(st::SafetensorsFile::open(dir + "/model.safetensors")->contains("lm_head.weight"));
  EXPECT_LT(max_diff_to_naive(dir), 1e-4);
}

TEST(Architectures, ShardedCheckpointGivesTheSameLogits) {
  const CheckpointShape shape = tiny_shape("llama");
  const std::string single = write_tiny(shape);
  const std::string sharded = write_tiny(shape, /*max_shard_bytes=*/20000);
  ASSERT_TRUE(test::slurp(sharded + "/model.safetensors.index.json").find("model-00001-of-") != std::string::npos);
  at::set_num_threads(1);
  KVCache c1 = LlamaModel::load(single)->new_cache(), c2 = LlamaModel::load(sharded)->new_cache();
  const at::Tensor a = LlamaModel::load(single)->forward(kTokens, c1);
  const at::Tensor b = LlamaModel::load(sharded)->forward(kTokens, c2);
  EXPECT_TRUE(at::equal(a, b));
}

// 16-bit checkpoints stay 16-bit in memory on CPU (half the bytes a decode step reads) and compute
// what the same weights widened to fp32 at load compute.
TEST(Architectures, HalfPrecisionCheckpointStaysHalfOnCpu) {
  for (const std::string stored : {"bfloat16", "float16"}) {
    CheckpointShape shape = tiny_shape("llama");
    shape.dtype = stored;
    const std::string dir = write_tiny(shape);
    auto half = LlamaModel::load(dir);
    auto widened = LlamaModel::load(dir, LoadOptions{"cpu", "float32"});
    EXPECT_EQ(half->dtype(), at::kFloat) << stored;
    EXPECT_EQ(half->weight_dtype(), stored == "float16" ? at::kHalf : at::kBFloat16);
    EXPECT_EQ(widened->weight_dtype(), at::kFloat);
    // Norms stay fp32 (they are a rounding error of the total); every matrix halves.
    EXPECT_NEAR(static_cast<double>(half->weight_bytes()) / static_cast<double>(widened->weight_bytes()), 0.5, 0.02);
    KVCache c1 = half->new_cache(), c2 = widened->new_cache();
    const at::Tensor a = half->forward(kTokens, c1), b = widened->forward(kTokens, c2);
    EXPECT_LT((a - b).abs().max().item<double>(), 1e-4) << stored;
    // Then one decode step: the matrix-vector path.
    const at::Tensor a1 = half->forward({4}, c1), b1 = widened->forward({4}, c2);
    EXPECT_LT((a1 - b1).abs().max().item<double>(), 1e-4) << stored;
  }
}

// generation_config.json lists the ids that end generation (an instruct model's end-of-turn token next to
// config.json's eos_token_id); generation stops at any of them.
TEST(Architectures, GenerationConfigAddsStopIds) {
  const std::string dir = write_tiny(tiny_shape("llama"));
  const auto write = [&](const std::string& text) { std::ofstream(dir + "/generation_config.json") << text; };
  write(R"({"bos_token_id": 1, "eos_token_id": [2, 7, 9]})");
  const auto model = LlamaModel::load(dir);
  for (int id : {2, 7, 9}) EXPECT_TRUE(model->config().is_eos(id)) << id;
  EXPECT_FALSE(model->config().is_eos(8));
  write(R"({"eos_token_id": 11})");
  EXPECT_TRUE(LlamaModel::load(dir)->config().is_eos(11));
  // The same reader serves the tokenizer, so the message names the file and the field either way.
  const auto expect_refused = [&](const std::string& text, const std::string& message) {
    write(text);
    try {
      LlamaModel::load(dir);
      ADD_FAILURE() << "a malformed generation_config.json was accepted: " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("generation_config.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  expect_refused(R"({"eos_token_id": ["<eos>"]})", "'eos_token_id' is not an integer");
  expect_refused(R"({"eos_token_id": -3})", "is not a token id");
  expect_refused(R"({"eos_token_id": 100000})", "eos_token_id 100000 is not below the vocabulary size");
  expect_refused(R"([2])", "expected a JSON object");
}

}  // namespace
}  // namespace kvc
