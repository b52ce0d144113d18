// SmolLM2-135M-Instruct from its Q4_1 GGUF (installed by scripts/setup.sh; skipped when absent): the
// prompt's ids (no BOS, as the file says), the logits and the perplexity against transformers
// (scripts/make_smollm2_goldens.py).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "eval/perplexity.h"
#include "model/llama_model.h"
#include "support/paths.h"
#include "tokenizer/tokenizer.h"

namespace {

using kvc::test::smollm2_gguf;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

#define SKIP_WITHOUT_SMOLLM2()                  \
  if (!std::filesystem::exists(smollm2_gguf())) \
  GTEST_SKIP() << smollm2_gguf() << " is absent (scripts/setup.sh installs it)"

TEST(SmolLM2Gguf, PromptsStartWithoutBosAsTheFileSays) {
  SKIP_WITHOUT_SMOLLM2();
  const kvc::Tokenizer tok = kvc::Tokenizer::load(smollm2_gguf());
  const auto golden = read_json(kvc::test::reference_dir("smollm2-135m") + "/logits.json");
  for (const auto& p : golden["prompts"]) {
    const std::vector<int> ids = p["ids"].get<std::vector<int>>();
    EXPECT_EQ(tok.encode_prompt(p["text"].get<std::string>()), ids) << p["text"];
  }
  EXPECT_EQ(tok.prompt_bos(), std::nullopt);
  // BOS is id 1, <|im_start|>: --bos still puts it first.
  EXPECT_EQ(tok.encode_prompt("Hi", kvc::BosChoice::Add).front(), 1);
  EXPECT_EQ(tok.piece(1), "<|im_start|>");
}

TEST(SmolLM2Gguf, LogitsMatchTransformers) {
  SKIP_WITHOUT_SMOLLM2();
  const auto golden = read_json(kvc::test::reference_dir("smollm2-135m") + "/logits.json");
  kvc::LoadOptions load;
  load.dtype = "float32";  // transformers dequantizes the blocks to float32
  const auto model = kvc::LlamaModel::load(smollm2_gguf(), load);
  double worst = 0;
  for (const auto& p : golden["prompts"]) {
    const std::vector<int> ids = p["ids"].get<std::vector<int>>();
    kvc::KVCache cache = model->new_cache();
    kvc::ForwardOptions options;
    options.all_logits = true;
    const at::Tensor logits = model->forward(ids, cache, options);
    const size_t first = p.value("first_position", size_t{0});
    const std::vector<int64_t> vocab = p["vocab_ids"].get<std::vector<int64_t>>();
    const auto expected = p["logits"].get<std::vector<std::vector<double>>>();
    const auto argmax = p["argmax"].get<std::vector<int64_t>>();
    ASSERT_EQ(expected.size(), ids.size() - first);
    double max_diff = 0;
    for (size_t t = 0; t < expected.size(); ++t) {
      const at::Tensor row = logits[static_cast<int64_t>(first + t)];
      EXPECT_EQ(row.argmax().item<int64_t>(), argmax[t]) << "position " << first + t;
      for (size_t j = 0; j < vocab.size(); ++j)
        max_diff = std::max(max_diff, std::fabs(row[vocab[j]].item<double>() - expected[t][j]));
    }
    std::printf("prompt of %zu tokens: max abs logit diff %.3g\n", ids.size(), max_diff);
    worst = std::max(worst, max_diff);
  }
  EXPECT_LT(worst, golden["tolerance"].get<double>());
}

TEST(SmolLM2Gguf, PerplexityMatchesTransformers) {
  SKIP_WITHOUT_SMOLLM2();
  const auto golden = read_json(kvc::test::reference_dir("smollm2-135m") + "/perplexity.json");
  kvc::LoadOptions load;
  load.dtype = "float32";
  const auto model = kvc::LlamaModel::load(smollm2_gguf(), load);
  const kvc::Tokenizer tok = kvc::Tokenizer::load(smollm2_gguf());
  std::ifstream in(kvc::test::data_file("wikitext2/wiki.test.raw"), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int> ids = tok.encode_prompt(text);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), golden["tokens_in_file"].get<int64_t>());
  kvc::WindowPlan plan;
  plan.window = golden["window"].get<int64_t>();
  plan.max_windows = golden["max_windows"].get<int64_t>();
  const kvc::PerplexityResult r = kvc::evaluate_perplexity(*model, ids, plan, false);
  std::printf("perplexity kvc %.5f, transformers %.5f over %lld tokens\n", r.ppl, golden["ppl"].get<double>(),
              static_cast<long long>(r.tokens_scored));
  EXPECT_EQ(r.tokens_scored, golden["tokens_scored"].get<int64_t>());
  EXPECT_NEAR(r.ppl / golden["ppl"].get<double>(), 1.0, 1e-4);
}

}  // namespace
