// Every architecture kvc runs, against Hugging Face transformers: random-weight checkpoints in
// data/reference/architectures/<case>/ with the logits transformers computes for a fixed sequence
// (scripts/make_architecture_goldens.py), compared position by position; and Llama and Qwen2 GGUF files
// written by llama.cpp's converter from such checkpoints (scripts/make_gguf_architecture_goldens.py),
// whose logits must be those transformers computes on the Hugging Face checkpoint.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/llama_model.h"
#include "model/tensor_bridge.h"
#include "support/paths.h"

namespace kvc {
namespace {

constexpr double kTolerance = 1e-4;  // float32 on both sides, summed in different orders

// gtest names allow no '-'.
std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

class TransformersArchitecture : public ::testing::TestWithParam<std::string> {};

TEST_P(TransformersArchitecture, LogitsMatchTransformers) {
  const std::string dir = test::reference_dir("architectures") + "/" + GetParam();
  std::ifstream in(dir + "/logits.json");
  ASSERT_TRUE(in.good()) << dir << "/logits.json";
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto ids = golden["ids"].get<std::vector<int>>();
  const auto expected = golden["logits"].get<std::vector<std::vector<double>>>();

  const auto model = LlamaModel::load(dir);
  KVCache cache = model->new_cache();
  const at::Tensor logits = model->forward(ids, cache).to(at::kDouble).contiguous();  // [T, V]
  ASSERT_EQ(logits.size(0), static_cast<int64_t>(expected.size()));
  ASSERT_EQ(logits.size(1), static_cast<int64_t>(expected[0].size()));
  double max_diff = 0;
  int64_t argmax_differs = 0;
  for (int64_t t = 0; t < logits.size(0); ++t) {
    const auto& row = expected[static_cast<size_t>(t)];
    int64_t best = 0;
    for (int64_t v = 0; v < logits.size(1); ++v) {
      max_diff = std::max(max_diff, std::abs(logits[t][v].item<double>() - row[static_cast<size_t>(v)]));
      if (row[static_cast<size_t>(v)] > row[static_cast<size_t>(best)]) best = v;
    }
    argmax_differs += logits[t].argmax().item<int64_t>() != best;
  }
  std::printf("%s: max abs logit diff %.3g over %zu positions (transformers %s)\n", GetParam().c_str(), max_diff,
              ids.size(), golden["transformers"].get<std::string>().c_str());
  EXPECT_LT(max_diff, kTolerance);
  EXPECT_EQ(argmax_differs, 0);
}

INSTANTIATE_TEST_SUITE_P(Cases, TransformersArchitecture,
                         ::testing::Values("llama", "llama-rope-linear", "llama-rope-llama3", "llama-rope-parameters",
                                           "mistral-sliding-window", "qwen2-biases", "gemma3"),
                         test_name);

// Gemma 3's sliding-window layers drop what their window no longer covers right after attention: fed in
// pieces (a prompt of 10, then one token at a time), the logits stay those transformers computes in one
// pass, and no local layer ever holds more than twice its window (8 here) after a step.
TEST(TransformersArchitectureGemma3, LocalLayersTrimmedAfterAttentionKeepTheLogits) {
  const std::string dir = test::reference_dir("architectures") + "/gemma3";
  std::ifstream in(dir + "/logits.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto ids = golden["ids"].get<std::vector<int>>();
  const auto expected = golden["logits"].get<std::vector<std::vector<double>>>();
  const auto model = LlamaModel::load(dir);
  const ModelConfig& c = model->config();
  KVCache cache = model->new_cache();
  std::vector<at::Tensor> rows{model->forward(std::vector<int>(ids.begin(), ids.begin() + 10), cache)};
  for (size_t t = 10; t < ids.size(); ++t) rows.push_back(model->forward({ids[t]}, cache));
  const at::Tensor logits = at::cat(rows, 0).to(at::kDouble);
  double max_diff = 0;
  for (int64_t t = 0; t < logits.size(0); ++t)
    for (int64_t v = 0; v < logits.size(1); ++v)
      max_diff = std::max(
          max_diff, std::abs(logits[t][v].item<double>() - expected[static_cast<size_t>(t)][static_cast<size_t>(v)]));
  EXPECT_LT(max_diff, kTolerance);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    if (!c.is_local_layer(l)) continue;
    EXPECT_LT(cache.layer(l).lengths().max().item<int64_t>(), 2 * c.local_window) << "layer " << l;
  }
}

class ConvertedGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertedGguf, LogitsMatchTransformersOnTheCheckpoint) {
  const std::string base = test::reference_dir("gguf-architectures") + "/" + GetParam();
  auto golden = st::SafetensorsFile::open(base + ".logits.safetensors");
  const at::Tensor ids_tensor = load_tensor(golden, "ids").to(at::kLong).contiguous();
  const std::vector<int> ids(ids_tensor.data_ptr<int64_t>(), ids_tensor.data_ptr<int64_t>() + ids_tensor.numel());
  const at::Tensor expected = load_tensor(golden, "logits").to(at::kDouble);

  const auto model = LlamaModel::load(base + ".gguf");
  KVCache cache = model->new_cache();
  const at::Tensor logits = model->forward(ids, cache).to(at::kDouble);
  ASSERT_EQ(logits.sizes(), expected.sizes());
  const double max_diff = (logits - expected).abs().max().item<double>();
  std::printf("%s.gguf: max abs logit diff %.3g over %zu positions\n", GetParam().c_str(), max_diff, ids.size());
  EXPECT_LT(max_diff, kTolerance);
  EXPECT_TRUE(logits.argmax(1).equal(expected.argmax(1)));
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvertedGguf, ::testing::Values("llama", "llama-rope-llama3", "qwen2"), test_name);

}  // namespace
}  // namespace kvc
