// Gemma 3 270M from its GGUF (installed by scripts/setup.sh; skipped when absent): the tokenizer and
// the logits against the golden files that scripts/make_gemma3_*_goldens.py write with independent
// references, and the one-line errors for GGUFs kvc cannot run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "cache/dense_layer_cache.h"
#include "compression/compression_spec.h"
#include "core/rope.h"
#include "eval/perplexity.h"
#include "lowrank/gate_training.h"
#include "model/llama_model.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "support/gguf_test_writer.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace {

using kvc::test::gemma3_gguf;

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

#define SKIP_WITHOUT_GEMMA3()                  \
  if (!std::filesystem::exists(gemma3_gguf())) \
  GTEST_SKIP() << gemma3_gguf() << " is absent (scripts/setup.sh installs it)"

TEST(Gemma3Gguf, TokenizerMatchesSentencePiece) {
  SKIP_WITHOUT_GEMMA3();
  const kvc::Tokenizer tok = kvc::Tokenizer::load(gemma3_gguf());
  const auto golden = read_json(kvc::test::reference_dir("gemma3-270m") + "/tokenizer.json");
  ASSERT_EQ(tok.bos_id(), golden["bos_id"].get<int>());
  EXPECT_EQ(tok.with_special_ids({}), std::vector<int>{golden["bos_id"].get<int>()});
  int agree = 0, total = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int> ids = tok.encode(text);
    const bool same = ids == c["ids"].get<std::vector<int>>();
    agree += same;
    ++total;
    EXPECT_TRUE(same) << "text: " << text << "\nkvc: " << ::testing::PrintToString(ids);
    // Every text decodes back to itself.
    EXPECT_EQ(tok.decode(ids), text);
  }
  std::printf("tokenizer: %d/%d texts identical to the reference\n", agree, total);
}

TEST(Gemma3Gguf, LogitsMatchTransformers) {
  SKIP_WITHOUT_GEMMA3();
  const std::string golden_path = kvc::test::reference_dir("gemma3-270m") + "/logits.json";
  if (!std::filesystem::exists(golden_path)) GTEST_SKIP() << golden_path << " not generated";
  const auto golden = read_json(golden_path);
  // transformers' float32 reference: the blocks dequantized at load, as it does.
  kvc::LoadOptions float32;
  float32.dtype = "float32";
  const auto model = kvc::LlamaModel::load(gemma3_gguf(), float32);
  const kvc::Tokenizer tok = kvc::Tokenizer::load(gemma3_gguf());
  double worst = 0;
  for (const auto& p : golden["prompts"]) {
    const std::vector<int> ids = p["ids"].get<std::vector<int>>();
    EXPECT_EQ(tok.with_special_ids(tok.encode(p["text"].get<std::string>())), ids);
    kvc::KVCache cache = model->new_cache();
    kvc::ForwardOptions options;
    options.all_logits = true;
    // Long prompts keep only their last positions in the file; those are decoded one token at a time,
    // after the local layers' caches have been trimmed to their window.
    const size_t first = p.value("first_position", size_t{0});
    at::Tensor logits;
    if (first == 0) {
      logits = model->forward(ids, cache, options);
    } else {
      std::vector<at::Tensor> rows;
      model->forward(std::vector<int>(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(first)), cache, {});
      for (size_t t = first; t < ids.size(); ++t) rows.push_back(model->forward({ids[t]}, cache, {})[0]);
      // Rows before `first` are not compared; zeros keep the indexing by position.
      logits = at::cat({at::zeros({static_cast<int64_t>(first), rows[0].size(0)}), at::stack(rows)});
    }
    const std::vector<int64_t> vocab = p["vocab_ids"].get<std::vector<int64_t>>();
    const auto expected = p["logits"].get<std::vector<std::vector<double>>>();
    const auto argmax = p["argmax"].get<std::vector<int64_t>>();
    ASSERT_EQ(expected.size(), ids.size() - first);
    double max_diff = 0;
    for (size_t t = 0; t < expected.size(); ++t) {
      const at::Tensor row = logits[static_cast<int64_t>(first + t)];
      EXPECT_EQ(row.argmax().item<int64_t>(), argmax[t]) << "position " << first + t;
      for (size_t j = 0; j < vocab.size(); ++j) {
        max_diff = std::max(max_diff, std::fabs(row[vocab[j]].item<double>() - expected[t][j]));
      }
    }
    std::printf("prompt of %zu tokens: max abs logit diff %.3g\n", ids.size(), max_diff);
    worst = std::max(worst, max_diff);
  }
  EXPECT_LT(worst, golden["tolerance"].get<double>());
}

TEST(Gemma3Gguf, PerplexityMatchesTransformers) {
  SKIP_WITHOUT_GEMMA3();
  const std::string golden_path = kvc::test::reference_dir("gemma3-270m") + "/perplexity.json";
  if (!std::filesystem::exists(golden_path)) GTEST_SKIP() << golden_path << " not generated";
  const auto golden = read_json(golden_path);
  // transformers' float32 reference: the blocks dequantized at load, as it does.
  kvc::LoadOptions float32;
  float32.dtype = "float32";
  const auto model = kvc::LlamaModel::load(gemma3_gguf(), float32);
  const kvc::Tokenizer tok = kvc::Tokenizer::load(gemma3_gguf());
  std::ifstream in(kvc::test::data_file("wikitext2/wiki.test.raw"), std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<int> ids = tok.with_special_ids(tok.encode(text));
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

// Gate training runs the model's own layout: the global layers gated, the sliding-window ones keeping
// their window with their own RoPE. With an identity basis and gates wide open (a bias ramp so steep
// that every soft mask is 1) the gated model is the exact one, so the held-out KL must be ~0 and every
// dimension kept; gating the sliding-window layers with the global layers' RoPE gave KL > 3 here.
TEST(Gemma3Gguf, GateTrainingWithOpenGatesIsTheExactModel) {
  SKIP_WITHOUT_GEMMA3();
  // Training differentiates through the weights: they are dequantized at load.
  kvc::LoadOptions float32;
  float32.dtype = "float32";
  const auto model = kvc::LlamaModel::load(gemma3_gguf(), float32);
  const kvc::ModelConfig& c = model->config();
  const kvc::Tokenizer tok = kvc::Tokenizer::load(gemma3_gguf());
  std::ifstream in(kvc::test::data_file("wikitext2/wiki.test.raw"), std::ios::binary);
  std::string text(4000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  const std::vector<int> ids = tok.encode_prompt(text);
  ASSERT_GT(ids.size(), 300u);
  const std::vector<int> train(ids.begin(), ids.begin() + 200), heldout(ids.begin() + 200, ids.end());

  kvc::lowrank::Artifact bases;
  bases.kind = kvc::lowrank::kBasesKind;
  const at::Tensor eye = at::eye(c.kv_dim(), at::kFloat);
  for (int64_t l = 0; l < c.num_layers; ++l) bases.layers.push_back({{eye, {}, {}, {}}, {eye, {}, {}, {}}, {}});
  kvc::lowrank::TrainOptions o;
  o.loss = kvc::lowrank::TrainLoss::KlFromExact;
  o.steps = 1;
  o.batch = 1;
  o.seq_len = 64;
  o.lr = 1e-9;
  o.init_bias = 1e4;
  o.eval_windows = 1;
  o.show_progress = false;
  try {
    kvc::lowrank::train_gates(*kvc::LlamaModel::load(gemma3_gguf()), bases, train, heldout, o);
    ADD_FAILURE() << "gate training ran on weights in GGUF blocks";
  } catch (const kvc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--dtype float32"), std::string::npos) << e.what();
  }
  const kvc::lowrank::TrainResult r = kvc::lowrank::train_gates(*model, bases, train, heldout, o);
  ASSERT_EQ(r.evals.size(), 1u);
  EXPECT_LT(r.evals[0].heldout_kl, 1e-4);
  EXPECT_NEAR(r.evals[0].heldout_ce, r.evals[0].heldout_ce_full, 1e-3);
  EXPECT_DOUBLE_EQ(r.evals[0].hard_retain, 1.0);
}

// Eviction acts on the global layers only: a local layer's cache is bounded by its window already, and
// its whole window stays visible to attention; the footprint says what the local windows hold.
TEST(Gemma3Gguf, PressCompressesTheGlobalLayersOnly) {
  SKIP_WITHOUT_GEMMA3();
  const auto model = kvc::LlamaModel::load(gemma3_gguf());
  const kvc::ModelConfig& c = model->config();
  const kvc::Tokenizer tok = kvc::Tokenizer::load(gemma3_gguf());
  std::ifstream in(kvc::test::data_file("wikitext2/wiki.test.raw"), std::ios::binary);
  std::string text(6000, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<int> ids = tok.encode_prompt(text);
  ids.resize(400);  // within the 512-token window: local layers hold every token

  kvc::CompressionSpec spec;
  spec.press = "snapkv";
  spec.ratio = 0.5;
  const kvc::CacheSetup setup = kvc::build_cache_setup(spec, *model);
  kvc::KVCache cache = setup.new_cache(*model);
  const auto observer = setup.new_observer();
  kvc::ForwardOptions o;
  o.all_logits = false;
  o.observer = observer.get();
  model->forward(ids, cache, o);

  int64_t local_layers = 0, window_bytes = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const at::Tensor lengths = cache.layer(l).lengths();
    if (c.is_local_layer(l)) {
      ++local_layers;
      window_bytes += cache.layer(l).footprint().payload_bytes;
      EXPECT_EQ(lengths.max().item<int64_t>(), 400) << "local layer " << l;
    } else {
      EXPECT_EQ(lengths.max().item<int64_t>(), 200) << "global layer " << l;
    }
  }
  EXPECT_EQ(local_layers, 15);
  EXPECT_EQ(cache.footprint().window_payload_bytes, window_bytes);
  EXPECT_GT(cache.footprint().payload_bytes, window_bytes);
}

// kvpress's KVCompose scoring feeds the prompt a second time; on Gemma 3 the copy also runs through the
// sliding-window layers (its hidden states feed the global ones), and no layer keeps any of it.
TEST(Gemma3Gguf, RepeatedPromptScoringLeavesOnlyThePromptInEveryLayer) {
  SKIP_WITHOUT_GEMMA3();
  const auto model = kvc::LlamaModel::load(gemma3_gguf());
  const kvc::ModelConfig& c = model->config();
  std::vector<int> ids;
  for (int i = 0; i < 300; ++i) ids.push_back(1000 + (i * 37) % 5000);
  kvc::CompressionSpec spec;
  spec.press = "kvcompose:task=repeat";
  spec.ratio = 0.5;
  const kvc::CacheSetup setup = kvc::build_cache_setup(spec, *model);
  kvc::KVCache cache = setup.new_cache(*model);
  const auto observer = setup.new_observer();
  model->forward(ids, cache, kvc::ForwardOptions{false, observer.get()});
  EXPECT_EQ(cache.next_position(), 300);
  int64_t global_entries = 0;
  for (int64_t l = 0; l < c.num_layers; ++l) {
    for (int64_t h = 0; h < c.num_kv_heads; ++h) {
      const at::Tensor p = require_per_head_layout(cache.layer(l), "expose positions").entry_positions(h);
      EXPECT_LT(p.max().item<int64_t>(), 300) << l;
      if (c.is_local_layer(l)) {
        EXPECT_EQ(p.numel(), 300) << "local layer " << l;
      } else {
        global_entries += p.numel();
      }
    }
  }
  EXPECT_EQ(global_entries, 150 * 3 * c.num_kv_heads);  // the global layers share 3 x 150 entries per head
}

// KeyRerotation on a model whose sliding-window layers are not compressed: those layers hold the prompt's last
// 512 tokens at their own positions, so the re-rotated global entries take the continuous positions that end
// where the prompt ended and the next token comes at the prompt's length (renumbering from the kept count, as
// on a model compressed in every layer, would put every window after the next token, where the mask hides it).
// Against SnapKV's cache of the same prompt: the same entries, each global key rotated from its old position
// to its new one, the windows untouched.
TEST(Gemma3Gguf, KeyRerotationKeepsTheSlidingWindowsBeforeTheNextToken) {
  SKIP_WITHOUT_GEMMA3();
  const auto model = kvc::LlamaModel::load(gemma3_gguf());
  const kvc::ModelConfig& c = model->config();
  const int64_t P = 700, kept = 350;
  std::vector<int> ids;
  for (int64_t i = 0; i < P; ++i) ids.push_back(static_cast<int>(1000 + (i * 37) % 5000));
  const auto prefill = [&](const std::string& press) {
    kvc::CompressionSpec spec;
    spec.press = press;
    spec.ratio = 0.5;
    const kvc::CacheSetup setup = kvc::build_cache_setup(spec, *model);
    kvc::KVCache cache = setup.new_cache(*model);
    const auto observer = setup.new_observer();
    model->forward(ids, cache, kvc::ForwardOptions{false, observer.get()});
    return cache;
  };
  const kvc::KVCache plain = prefill("snapkv"), moved = prefill("key_rerotation:base=snapkv");
  EXPECT_EQ(moved.next_position(), P);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto& before = dynamic_cast<const kvc::DenseLayerCache&>(plain.layer(l));
    const auto& after = dynamic_cast<const kvc::DenseLayerCache&>(moved.layer(l));
    if (c.is_local_layer(l)) {
      EXPECT_TRUE(after.positions().equal(before.positions())) << "local layer " << l;
      EXPECT_EQ(after.positions().max().item<int64_t>(), P - 1) << "local layer " << l;
      EXPECT_TRUE(after.keys().equal(before.keys())) << "local layer " << l;
      continue;
    }
    const at::Tensor expected_positions =
        at::arange(P - kept, P, at::kLong).unsqueeze(0).expand({c.num_kv_heads, kept});
    ASSERT_TRUE(after.positions().equal(expected_positions)) << "global layer " << l;
    const at::Tensor rotated = model->rope()->apply(
        model->rope()->unapply(before.keys().to(at::kDouble), before.positions()), expected_positions.contiguous());
    // The cache stores f16 keys (the GGUF default): within half an f16 step of the re-rotation in float64.
    const at::Tensor excess = (after.keys().to(at::kDouble) - rotated).abs() - rotated.abs() * std::ldexp(1.0, -11);
    EXPECT_LE(excess.max().item<double>(), 1e-6) << "global layer " << l;
    EXPECT_TRUE(after.values().equal(before.values())) << "global layer " << l;
  }
}

std::string write_file(const std::string& name, const std::string& bytes) {
  const std::string path = (std::filesystem::temp_directory_path() / name).string();
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

void expect_one_line_error(const std::function<void()>& action, const std::string& needle) {
  try {
    action();
    FAIL() << "expected an error mentioning " << needle;
  } catch (const kvc::Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

// Only the global layers keep their cache on storage (layers 5, 11, 17): the shared state must still
// count decode steps, hold its RAM cluster cache once in the footprint and prefetch for the next
// storage layer, whatever the model numbers those layers.
TEST(Gemma3Gguf, RetrievalOnTheGlobalLayersCountsStepsRamAndPrefetches) {
  SKIP_WITHOUT_GEMMA3();
  namespace rt = kvc::retrieval;
  const auto model = kvc::LlamaModel::load(gemma3_gguf());
  const kvc::ModelConfig& c = model->config();
  std::vector<int> ids{c.bos_token_id};
  for (int i = 1; i < 300; ++i) ids.push_back(1000 + (i * 7919) % 20000);
  const int steps = 6;
  struct Run {
    std::shared_ptr<rt::RetrievalShared> shared;
    std::unique_ptr<kvc::KVCache> cache;
    std::vector<rt::RetrievalLayerCache*> layers;  // the storage layers of `cache`
  };
  // Prefill and decode `steps` tokens through a retrieval cache made from `spec`.
  const auto run = [&](const std::string& spec) {
    Run r;
    r.shared = rt::make_retrieval_shared(rt::RetrievalConfig::parse(spec), rt::RecordFormat{c.head_dim},
                                         kvc::test::make_temp_dir("kvc-gemma-retrieval") + "/store.kvs", false);
    r.cache = std::make_unique<kvc::KVCache>(model->new_cache(
        kvc::recording_layers(rt::retrieval_layer_factory(c.attention_shape(), model->rope(), r.shared), &r.layers)));
    kvc::ForwardOptions last;
    last.all_logits = false;
    model->forward(ids, *r.cache, last);
    for (int t = 0; t < steps; ++t) model->forward({1000 + 37 * t}, *r.cache, last);
    EXPECT_EQ(r.layers.size(), 3u);
    EXPECT_EQ(rt::storage_io_json(*r.shared)["decode_steps"].get<int64_t>(), steps) << spec;
    return r;
  };
  // A RAM cache too small for what a step reads, so the next storage layer's clusters are read ahead.
  const Run prefetching = run("adaptive:budget=32,cache_kb=8,prefetch=1");
  EXPECT_GT(prefetching.shared->prefetch->counters().issued, 0) << "no read-ahead for the next global layer";

  // The RAM cache is in the footprint exactly once: 10 more entries in it add 10 records' bytes.
  const Run roomy = run("adaptive:budget=32,cache_kb=4096");
  const auto ram = [&] {
    int64_t total = 0;
    for (const auto* layer : roomy.layers) total += layer->footprint().ram_bytes;
    return total;
  };
  const int64_t before = ram();
  rt::EntryBlock block(c.head_dim);
  std::vector<float> zeros(static_cast<size_t>(c.head_dim), 0.0f);
  for (int i = 0; i < 10; ++i) block.push(zeros.data(), zeros.data(), i);
  roomy.shared->cache->put(1 << 30, block, true);
  EXPECT_EQ(ram() - before, 10 * rt::RecordFormat{c.head_dim}.record_bytes());
}

TEST(Gemma3GgufErrors, UnsupportedArchitecture) {
  kvc::test::GgufTestWriter w;
  w.add_string("general.architecture", "bert");
  const std::string path = write_file("kvc_bert.gguf", w.build());
  expect_one_line_error([&] { kvc::LlamaModel::load(path); }, "unsupported GGUF architecture 'bert'");
}

TEST(Gemma3GgufErrors, MissingTokenizerMetadata) {
  kvc::test::GgufTestWriter w;
  w.add_string("general.architecture", "gemma3");
  const std::string path = write_file("kvc_no_tokenizer.gguf", w.build());
  expect_one_line_error([&] { kvc::Tokenizer::load(path); }, "tokenizer.ggml.model");
  kvc::test::GgufTestWriter spm;
  spm.add_string("tokenizer.ggml.model", "llama");
  spm.add_string_array("tokenizer.ggml.tokens", {"<pad>", "a"});
  const std::string spm_path = write_file("kvc_no_scores.gguf", spm.build());
  expect_one_line_error([&] { kvc::Tokenizer::load(spm_path); }, "tokenizer.ggml.scores");
}

// llama.cpp stores llama3 RoPE scaling as rope_freqs.weight, head_dim / 2 positive divisors; any other
// count or a non-positive value is one line naming the tensor.
TEST(Gemma3GgufErrors, MalformedRopeFrequencies) {
  const auto with_divisors = [](const std::vector<float>& divisors) {
    kvc::test::GgufTestWriter w;
    w.add_string("general.architecture", "llama");
    const std::pair<const char*, uint32_t> sizes[] = {
        {"llama.embedding_length", 16},    {"llama.feed_forward_length", 32},    {"llama.block_count", 1},
        {"llama.attention.head_count", 2}, {"llama.attention.head_count_kv", 2}, {"llama.context_length", 64}};
    for (const auto& [key, value] : sizes) w.add_u32(key, value);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    std::string bytes(divisors.size() * 4, '\0');
    std::memcpy(bytes.data(), divisors.data(), bytes.size());
    w.add_tensor("rope_freqs.weight", {divisors.size()}, 0, 0, bytes);
    return w.build();
  };
  // head_dim 8: four divisors are expected.
  expect_one_line_error(
      [&] {
        kvc::LlamaModel::load(write_file("kvc_rope_freqs_count.gguf", with_divisors({1, 2, 4})));
      },
      "rope_freqs.weight must be 4 float32 values");
  expect_one_line_error(
      [&] {
        kvc::LlamaModel::load(write_file("kvc_rope_freqs_zero.gguf", with_divisors({1, 2, 0, 4})));
      },
      "rope_freqs.weight[2] is 0");
}

// A Gemma 3 GGUF small enough to write here, whose one tensor of an IQ type kvc cannot decode.
TEST(Gemma3GgufErrors, TensorOfUnknownBlockType) {
  kvc::test::GgufTestWriter w;
  w.add_string("general.architecture", "gemma3");
  const std::pair<const char*, uint32_t> sizes[] = {{"gemma3.embedding_length", 256},
                                                    {"gemma3.feed_forward_length", 256},
                                                    {"gemma3.block_count", 1},
                                                    {"gemma3.attention.head_count", 1},
                                                    {"gemma3.attention.head_count_kv", 1},
                                                    {"gemma3.attention.key_length", 256},
                                                    {"gemma3.attention.value_length", 256},
                                                    {"gemma3.context_length", 64},
                                                    {"gemma3.attention.sliding_window", 8}};
  for (const auto& [key, value] : sizes) w.add_u32(key, value);
  w.add_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<pad>", "<eos>", "<bos>", "a"});
  // token_embd as IQ2_XXS (type 16: 256 values in 66 bytes), 4 rows of 256.
  w.add_tensor("token_embd.weight", {256, 4}, 16, 0, std::string(4 * 66, '\0'));
  const std::string path = write_file("kvc_iq2.gguf", w.build());
  expect_one_line_error([&] { kvc::LlamaModel::load(path); }, "IQ2_XXS");
}

// The GGUF path is as strict as config.json and safetensors: a RoPE base past 1e12, a BOS id outside
// the vocabulary, a NaN weight, overlapping tensors, and more layers in the file than block_count.
kvc::test::GgufTestWriter small_llama(uint32_t block_count = 1) {
  kvc::test::GgufTestWriter w;
  w.add_string("general.architecture", "llama");
  const std::pair<const char*, uint32_t> sizes[] = {
      {"llama.embedding_length", 16},    {"llama.feed_forward_length", 32},    {"llama.block_count", block_count},
      {"llama.attention.head_count", 2}, {"llama.attention.head_count_kv", 2}, {"llama.context_length", 64}};
  for (const auto& [key, value] : sizes) w.add_u32(key, value);
  w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
  return w;
}

std::string f32_values(size_t count, float value) {
  std::vector<float> values(count, value);
  std::string bytes(count * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(GgufStrictness, MetadataOutsideConfigJsonsRangesIsRefused) {
  kvc::test::GgufTestWriter rope = small_llama();
  rope.add_f32("llama.rope.freq_base", 1e30f);
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_rope_base.gguf", rope.build())); },
                        "rope.freq_base is 1.0000000150474662e+30, outside (1, 1e+12]");
  kvc::test::GgufTestWriter bos = small_llama();
  bos.add_u32("tokenizer.ggml.bos_token_id", 4000000000u);
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_bos_range.gguf", bos.build())); },
                        "outside the vocabulary of 4 tokens");
}

TEST(GgufStrictness, NonFiniteWeightsAndOverlappingTensorsAreRefused) {
  kvc::test::GgufTestWriter nan = small_llama();
  std::string embedding = f32_values(16 * 4, 0.5f);
  const float not_a_number = std::nanf("");
  std::memcpy(&embedding[4 * 37], &not_a_number, 4);
  nan.add_tensor("token_embd.weight", {16, 4}, 0, 0, embedding);
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_nan.gguf", nan.build())); },
                        "'token_embd.weight' holds a non-finite value (NaN or infinity) in element 37");
  // Q8_0 (34-byte blocks, an f16 scale first): the second block's scale is f16 infinity.
  kvc::test::GgufTestWriter scale = small_llama();
  std::string blocks(2 * 34, '\x01');
  blocks[34] = '\x00';
  blocks[35] = '\x7c';
  scale.add_tensor("token_embd.weight", {64}, 8, 0, blocks);
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_inf_scale.gguf", scale.build())); }, "in block 1");
  kvc::test::GgufTestWriter overlap = small_llama();
  overlap.add_tensor("token_embd.weight", {16, 4}, 0, 0, f32_values(16 * 4, 0.5f));
  overlap.add_tensor("output_norm.weight", {16}, 0, 128, f32_values(16, 1.0f));  // inside token_embd's 256 bytes
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_overlap.gguf", overlap.build())); }, "overlap");
}

TEST(GgufStrictness, MoreLayersThanTheConfigGivesAreRefused) {
  kvc::test::GgufTestWriter w = small_llama(1);
  w.add_tensor("token_embd.weight", {16, 4}, 0, 0, f32_values(16 * 4, 0.5f));
  w.add_tensor("blk.1.attn_norm.weight", {16}, 0, 256, f32_values(16, 1.0f));
  expect_one_line_error([&] { kvc::LlamaModel::load(write_file("kvc_layers.gguf", w.build())); },
                        "more than the 1 layers");
  // The same rule for config.json: stories260K has 5 layers.
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("kvc_layers_" + std::to_string(::getpid()))).string();
  std::filesystem::copy(kvc::test::model_dir("stories260K"), dir, std::filesystem::copy_options::recursive);
  std::string config = kvc::test::slurp(dir + "/config.json");
  const size_t at = config.find("\"num_hidden_layers\": 5");
  ASSERT_NE(at, std::string::npos);
  config.replace(at, std::string("\"num_hidden_layers\": 5").size(), "\"num_hidden_layers\": 4");
  kvc::test::write_bytes(dir + "/config.json", config);
  expect_one_line_error([&] { kvc::LlamaModel::load(dir); }, "more than the 4 layers");
  std::filesystem::remove_all(dir);
}

}  // namespace
