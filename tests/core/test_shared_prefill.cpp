// One prefill serving many compression methods (harness/shared_prefill.h), against each method's own
// run: the same cache bit for bit after the prompt, the same logits at every later step, the same
// predictions and bytes through the harness, in both query modes; setups that change the prefill run alone,
// and presses that score the prompt with tokens of their own share a prefill with those scoring the same.
#include <gtest/gtest.h>

#include <filesystem>

#include "cache/dense_layer_cache.h"
#include "cache/ragged_layer_cache.h"
#include "compression/compression_spec.h"
#include "harness/shared_prefill.h"
#include "lowrank/calibration.h"
#include "lowrank/lowrank_layer_cache.h"
#include "press/press_registry.h"
#include "support/head_positions.h"
#include "support/paths.h"
#include "support/press_names.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
namespace {

struct Loaded {
  std::shared_ptr<LlamaModel> model;
  Tokenizer tokenizer;
};

const Loaded& loaded(const std::string& path) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[path];
  if (!slot) {
    auto model = LlamaModel::load(path);
    const bool gguf = path.size() > 5 && path.substr(path.size() - 5) == ".gguf";
    slot = std::make_unique<Loaded>(Loaded{model, Tokenizer::load(gguf ? path : path + "/tokenizer.model")});
  }
  return *slot;
}

// Natural text (real attention patterns), BOS first, `n` tokens.
std::vector<int> text_prompt(const Loaded& m, int64_t n) {
  const std::string text =
      test::slurp(test::data_file("pg_essays/addiction.txt")) + test::slurp(test::data_file("pg_essays/apple.txt"));
  std::vector<int> ids = m.tokenizer.encode_prompt(text);
  EXPECT_GE(static_cast<int64_t>(ids.size()), n);
  ids.resize(static_cast<size_t>(n));
  return ids;
}

// Every registered press at `ratio`, a few with parameters that change what they ask the prefill for
// (so the shared probes are a true union), and the uncompressed cache.
// With `cache_type`, each over the dense cache stored in that type (a sweep's typed rows); D2O without
// merging on a block type, whose rows it cannot rewrite.
std::vector<CacheSetup> every_press(const LlamaModel& model, double ratio, const std::string& cache_type = "") {
  std::vector<std::string> specs{"none", "snapkv:window=4", "pyramidkv:window=16"};
  const bool blocks = cache_type == "q8_0" || cache_type == "q4_0";
  // key_rerotation, finch and merging rewrite rows, which blocks cannot take; kvzip scores a reconstruction of the
  // prompt, kvcompose's default a repeated prompt: prefills of their own (tested on their own below).
  for (const auto& name : test::ratio_presses()) {
    if ((blocks && test::rewrites_rows(name)) || name == "kvzip") continue;
    if (name == "d2o" && blocks) {
      specs.push_back("d2o:merge=0");
    } else if (name == "kvcompose" || name == "kvcompose_unstructured") {
      specs.push_back(name + ":task=window");
    } else {
      specs.push_back(name);
    }
  }
  std::vector<CacheSetup> setups;
  for (const auto& spec : specs) {
    CompressionSpec c;
    c.press = spec;
    c.ratio = spec == "none" ? 0.0 : ratio;
    c.cache_type = cache_type;
    setups.push_back(build_cache_setup(c, model));
  }
  return setups;
}

std::vector<const CacheSetup*> pointers(const std::vector<CacheSetup>& setups) {
  std::vector<const CacheSetup*> out;
  for (const auto& s : setups) out.push_back(&s);
  return out;
}

at::Tensor head_rows(const LayerCache& layer, int64_t h, bool keys) {
  if (const auto* d = dynamic_cast<const DenseLayerCache*>(&layer)) return (keys ? d->keys() : d->values())[h];
  const auto& r = dynamic_cast<const RaggedLayerCache&>(layer);
  return keys ? r.head_keys(h) : r.head_values(h);
}

void expect_same_cache(const KVCache& own, const KVCache& replayed) {
  ASSERT_EQ(own.next_position(), replayed.next_position());
  for (int64_t l = 0; l < own.num_layers(); ++l) {
    SCOPED_TRACE(::testing::Message() << "layer " << l);
    const LayerCache& a = own.layer(l);
    const LayerCache& b = replayed.layer(l);
    ASSERT_EQ(a.layout(), b.layout());
    const CacheFootprint fa = a.footprint(), fb = b.footprint();
    EXPECT_EQ(fa.entries, fb.entries);
    EXPECT_EQ(fa.payload_bytes, fb.payload_bytes);
    EXPECT_EQ(fa.resident_bytes, fb.resident_bytes);
    if (const auto* low = dynamic_cast<const lowrank::LowRankLayerCache*>(&a)) {
      const auto& other = dynamic_cast<const lowrank::LowRankLayerCache&>(b);
      EXPECT_TRUE(low->positions().equal(other.positions()));
      EXPECT_TRUE(low->key_ranks().equal(other.key_ranks()));
      EXPECT_TRUE(low->value_ranks().equal(other.value_ranks()));
      EXPECT_TRUE(low->reconstructed_keys().equal(other.reconstructed_keys()));
      EXPECT_TRUE(low->reconstructed_values().equal(other.reconstructed_values()));
      continue;
    }
    const auto pa = test::head_positions(a), pb = test::head_positions(b);
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t h = 0; h < pa.size(); ++h) {
      EXPECT_TRUE(pa[h].equal(pb[h])) << "positions of head " << h;
      const auto hh = static_cast<int64_t>(h);
      EXPECT_TRUE(head_rows(a, hh, true).equal(head_rows(b, hh, true))) << "keys of head " << h;
      EXPECT_TRUE(head_rows(a, hh, false).equal(head_rows(b, hh, false))) << "values of head " << h;
    }
  }
}

// Each setup's own prefill and `steps` teacher-forced decode steps against the shared prefill's replay:
// caches equal after the prompt and after the steps, logits equal at every step.
void expect_replays_equal_own_runs(const Loaded& m, const std::vector<CacheSetup>& setups, int64_t prompt_tokens,
                                   int64_t steps) {
  const LlamaModel& model = *m.model;
  const std::vector<int> text = text_prompt(m, prompt_tokens + steps);
  const std::vector<int> prompt(text.begin(), text.begin() + prompt_tokens);
  SharedPrefill shared(model, pointers(setups), prompt);
  for (size_t i = 0; i < setups.size(); ++i) {
    SCOPED_TRACE(setups[i].name);
    KVCache own = setups[i].new_cache(model);
    auto observer = setups[i].new_observer();
    const ForwardOptions own_options{false, observer.get()};
    const at::Tensor own_logits = model.forward(prompt, own, own_options);
    SharedPrefill::Replay r = shared.replay(i);
    ASSERT_TRUE(own_logits.equal(shared.logits()));
    expect_same_cache(own, r.cache);
    const ForwardOptions replay_options{false, r.observer.get()};
    for (int64_t s = 0; s < steps; ++s) {
      const std::vector<int> token{text[static_cast<size_t>(prompt_tokens + s)]};
      ASSERT_TRUE(model.forward(token, own, own_options).equal(model.forward(token, r.cache, replay_options)))
          << "decode step " << s;
    }
    expect_same_cache(own, r.cache);
  }
}

// KVzip's reconstruction and KVCompose's repeated prompt are fed after the prompt to score it: one prefill
// with those tokens serves every setup that scores the same ones (KVzip at any ratio, either allocation),
// each replayed bit for bit as its own run; a setup scoring other tokens cannot join it.
TEST(SharedPrefill, PressesScoringTheSameTokensShareOnePrefill) {
  const Loaded& stories = loaded(test::model_dir("stories260K"));
  const LlamaModel& model = *stories.model;
  const auto setups_of = [&](const std::vector<std::pair<std::string, double>>& specs) {
    std::vector<CacheSetup> out;
    for (const auto& [press, ratio] : specs) {
      CompressionSpec c;
      c.press = press;
      c.ratio = ratio;
      out.push_back(build_cache_setup(c, model));
    }
    return out;
  };
  const std::vector<CacheSetup> kvzip = setups_of({{"kvzip", 0.5}, {"kvzip", 0.9}, {"kvzip:layerwise=1", 0.75}});
  expect_replays_equal_own_runs(stories, kvzip, 200, 6);
  const std::vector<CacheSetup> repeat = setups_of({{"kvcompose", 0.5}, {"kvcompose_unstructured", 0.75}});
  expect_replays_equal_own_runs(stories, repeat, 200, 6);

  const std::vector<CacheSetup> mixed =
      setups_of({{"snapkv", 0.5}, {"kvzip", 0.5}, {"kvcompose", 0.5}, {"kvzip", 0.9}});
  const std::vector<int> prompt = text_prompt(stories, 120);
  EXPECT_EQ(prefill_groups(pointers(mixed), {0, 1, 2, 3}, model, prompt),
            (std::vector<std::vector<size_t>>{{0}, {1, 3}, {2}}));
  EXPECT_THROW(SharedPrefill refused(model, {&mixed[1], &mixed[2]}, prompt), std::exception);
  EXPECT_THROW(SharedPrefill refused(model, {&mixed[0], &mixed[1]}, prompt), std::exception);
}

TEST(SharedPrefill, EveryPressReplaysItsOwnPrefillBitForBit) {
  const Loaded& stories = loaded(test::model_dir("stories260K"));
  expect_replays_equal_own_runs(stories, every_press(*stories.model, 0.5), 200, 6);
  expect_replays_equal_own_runs(stories, every_press(*stories.model, 0.9), 200, 6);
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));  // grouped-query attention
  expect_replays_equal_own_runs(micro, every_press(*micro.model, 0.75), 300, 6);
}

// A typed cache attends over its rounded entries from the prefill on, so its presses share a prefill of
// that type: the same bit for bit as their own typed runs, and not the fp32 cache's.
TEST(SharedPrefill, TypedCachesReplayTheirOwnTypedPrefillBitForBit) {
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
  const LlamaModel& model = *micro.model;
  for (const char* type : {"q8_0", "f16"}) {
    SCOPED_TRACE(type);
    const std::vector<CacheSetup> setups = every_press(model, 0.75, type);
    expect_replays_equal_own_runs(micro, setups, 300, 6);
    const std::vector<int> prompt = text_prompt(micro, 300);
    KVCache typed = setups.front().new_cache(model), fp32 = model.new_cache();
    const at::Tensor typed_logits = model.forward(prompt, typed), fp32_logits = model.forward(prompt, fp32);
    EXPECT_FALSE(typed_logits.equal(fp32_logits));
    const double bytes = static_cast<double>(typed.footprint().payload_bytes) / fp32.footprint().payload_bytes;
    EXPECT_DOUBLE_EQ(bytes, std::string(type) == "f16" ? 0.5 : 34.0 / 128);  // ggml's 34-byte blocks of 32 floats
  }
}

// A PCA basis of kvc-micro-lm's keys and values, calibrated once per test run.
const std::string& micro_bases() {
  static const std::string path = [] {
    const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
    lowrank::CalibrationOptions calibration;
    calibration.seq_len = 128;
    calibration.show_progress = false;
    const std::string file = test::make_temp_dir("kvc-shared-lowrank") + "/bases.safetensors";
    lowrank::write_artifact(
        file, lowrank::bases_artifact(lowrank::calibrate(*micro.model, text_prompt(micro, 512), calibration)),
        micro.model->config());
    return file;
  }();
  return path;
}

// The low-rank cache at `rank` alone and storing what presses keep (one token set per layer, bounded and
// not): all share one prefill into that cache.
std::vector<CacheSetup> lowrank_setups(const LlamaModel& model, int64_t rank) {
  std::vector<CacheSetup> setups;
  for (const auto& [press, ratio] : std::vector<std::pair<std::string, double>>{{"none", 0.0},
                                                                                {"snapkv:heads=shared", 0.5},
                                                                                {"snapkv:heads=shared", 0.9},
                                                                                {"h2o:heads=shared", 0.75},
                                                                                {"streaming_llm", 0.5}}) {
    CompressionSpec c;
    c.press = press;
    c.ratio = ratio;
    c.lowrank_file = micro_bases();
    c.rank = rank;
    setups.push_back(build_cache_setup(c, model));
  }
  return setups;
}

// A low-rank cache attends over its reconstructed entries from the prefill on, so the presses storing
// their entries in it share a prefill into that cache: the same bit for bit as their own runs.
TEST(SharedPrefill, LowRankCachesReplayTheirOwnLowRankPrefillBitForBit) {
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
  const std::vector<CacheSetup> setups = lowrank_setups(*micro.model, 24);
  for (const CacheSetup& s : setups) EXPECT_TRUE(shares_prefill(s, *micro.model)) << s.name;
  expect_replays_equal_own_runs(micro, setups, 300, 6);
}

TEST(SharedPrefill, GemmaLocalLayersAreCopiedAsTheirOwnPrefillTrimmedThem) {
  if (!std::filesystem::exists(test::gemma3_gguf())) GTEST_SKIP() << test::gemma3_gguf() << " is absent";
  const Loaded& gemma = loaded(test::gemma3_gguf());
  // Past twice the 512-token window, so the local layers trim during the prefill.
  std::vector<CacheSetup> setups;
  for (const char* spec : {"none", "snapkv", "streaming_llm", "dynamickv", "d2o", "kvcompose:task=window"}) {
    CompressionSpec c;
    c.press = spec;
    c.ratio = std::string(spec) == "none" ? 0.0 : 0.75;
    setups.push_back(build_cache_setup(c, *gemma.model));
  }
  expect_replays_equal_own_runs(gemma, setups, 1100, 3);
}

TEST(SharedPrefill, HarnessOutputsEqualRunsAloneInBothQueryModes) {
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
  const LlamaModel& model = *micro.model;
  std::vector<CacheSetup> setups = every_press(model, 0.5);
  // Scoring a second copy of the prompt (kvcompose) or its reconstruction (kvzip at two ratios): a shared
  // prefill of their own each.
  for (const auto& [press, ratio] :
       std::vector<std::pair<std::string, double>>{{"kvcompose:task=repeat", 0.5}, {"kvzip", 0.5}, {"kvzip", 0.9}}) {
    CompressionSpec scored;
    scored.press = press;
    scored.ratio = ratio;
    setups.push_back(build_cache_setup(scored, model));
  }
  CompressionSpec retrieval;  // a storage layout of its own: runs alone
  retrieval.retrieval = "adaptive:budget=32";
  setups.push_back(build_cache_setup(retrieval, model));
  ASSERT_FALSE(shares_prefill(setups.back(), model));
  // Typed caches share a prefill per type: one in q8_0 (two setups), one in f16.
  for (const auto& [type, press] :
       std::vector<std::pair<std::string, std::string>>{{"q8_0", "none"}, {"f16", "snapkv"}, {"q8_0", "tova"}}) {
    CompressionSpec typed;
    typed.cache_type = type;
    typed.press = press;
    typed.ratio = press == "none" ? 0.0 : 0.5;
    setups.insert(setups.begin() + 1, build_cache_setup(typed, model));
  }

  // Low-rank caches share a prefill per basis and rank: one at rank 24 (two setups), one at rank 12.
  for (const CacheSetup& s : lowrank_setups(model, 24)) {
    if (s.name.find("snapkv") != std::string::npos) setups.insert(setups.begin() + 1, s);
  }
  setups.insert(setups.begin() + 1, lowrank_setups(model, 12)[1]);

  const std::vector<int> text = text_prompt(micro, 400);
  PromptTokens prompt;
  prompt.context.assign(text.begin(), text.begin() + 380);
  prompt.question.assign(text.begin() + 380, text.end());
  const DecodeOptions decode{10, false};
  for (QueryMode mode : {QueryMode::Aware, QueryMode::Agnostic}) {
    SharedPrefillCost cost;
    const std::vector<std::optional<SampleOutput>> outputs =
        run_sample_shared(model, micro.tokenizer, pointers(setups), prompt, mode, decode, &cost);
    std::vector<SampleOutput> shared;
    for (const auto& o : outputs) {
      ASSERT_TRUE(o.has_value());
      shared.push_back(*o);
    }
    // One shared per cache type (f32, q8_0, f16), low-rank cache and set of scoring tokens, one alone.
    EXPECT_EQ(cost.prefills, 8);
    EXPECT_EQ(cost.shared_outputs, static_cast<int64_t>(setups.size()) - 1);
    for (size_t i = 0; i < setups.size(); ++i) {
      SCOPED_TRACE(setups[i].name);
      const SampleOutput alone = run_sample(model, micro.tokenizer, setups[i], prompt, mode, decode);
      EXPECT_EQ(shared[i].tokens, alone.tokens);
      EXPECT_EQ(shared[i].prediction, alone.prediction);
      EXPECT_EQ(shared[i].kv_payload_bytes, alone.kv_payload_bytes);
      EXPECT_EQ(shared[i].kv_ram_bytes, alone.kv_ram_bytes);
      // A cache in RAM holds its payload there; the retrieval cache keeps its entries on storage and
      // holds sinks, its window, buffers and centroids: less than the payload at 400 tokens.
      if (i + 1 < setups.size()) EXPECT_EQ(alone.kv_ram_bytes, alone.kv_payload_bytes);
      else EXPECT_LT(alone.kv_ram_bytes, alone.kv_payload_bytes / 2);
      EXPECT_EQ(shared[i].full_kv_bytes, alone.full_kv_bytes);
      EXPECT_EQ(shared[i].stop_reason, alone.stop_reason);
      EXPECT_EQ(shared[i].prompt_tokens, alone.prompt_tokens);
    }
  }
}

// Asked between setups, `stop` leaves the setups after it unrun, and those run are the outputs of an
// uninterrupted call: a sweep stopped by Ctrl-C checkpoints them and resumes with the rest.
TEST(SharedPrefill, StopLeavesTheRemainingSetupsUnrunAndTheOthersUnchanged) {
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
  const LlamaModel& model = *micro.model;
  std::vector<CacheSetup> setups = every_press(model, 0.5);
  setups.resize(6);
  CompressionSpec kvzip;  // a second shared prefill, with scoring tokens
  kvzip.press = "kvzip";
  kvzip.ratio = 0.5;
  setups.push_back(build_cache_setup(kvzip, model));
  const std::vector<int> text = text_prompt(micro, 200);
  PromptTokens prompt;
  prompt.context.assign(text.begin(), text.begin() + 180);
  prompt.question.assign(text.begin() + 180, text.end());
  const DecodeOptions decode{6, false};
  const auto whole = run_sample_shared(model, micro.tokenizer, pointers(setups), prompt, QueryMode::Aware, decode);
  for (size_t allowed : {size_t{0}, size_t{3}, setups.size() - 1}) {
    SCOPED_TRACE(allowed);
    size_t asked = 0;
    SharedPrefillCost cost;
    const auto stopped = run_sample_shared(model, micro.tokenizer, pointers(setups), prompt, QueryMode::Aware, decode,
                                           &cost, [&] { return asked++ > allowed; });
    size_t ran = 0;
    for (size_t i = 0; i < setups.size(); ++i) {
      if (!stopped[i]) continue;
      ++ran;
      EXPECT_EQ(stopped[i]->tokens, whole[i]->tokens) << setups[i].name;
      EXPECT_EQ(stopped[i]->kv_payload_bytes, whole[i]->kv_payload_bytes) << setups[i].name;
    }
    EXPECT_LT(ran, setups.size());
    EXPECT_EQ(static_cast<int64_t>(ran), cost.shared_outputs);
  }
}

// A stop asked between the shared prefill's layers ends it there (a sweep's Ctrl-C need not wait for a pass
// of minutes): the prefill throws InterruptedError at the layer where the stop first answers true, and
// run_sample_shared leaves that prefill's setups unrun.
TEST(SharedPrefill, StopEndsThePrefillBetweenItsLayers) {
  const Loaded& micro = loaded(test::model_dir("kvc-micro-lm"));
  const LlamaModel& model = *micro.model;
  ASSERT_GE(model.config().num_layers, 2);
  std::vector<CacheSetup> setups = every_press(model, 0.5);
  setups.resize(3);
  const std::vector<int> text = text_prompt(micro, 120);
  int asked = 0;
  EXPECT_THROW({ SharedPrefill prefill(model, pointers(setups), text, [&] { return ++asked == 2; }); },
               InterruptedError);
  EXPECT_EQ(asked, 2);  // the first layer ran, the second was never started
  PromptTokens prompt;
  prompt.context = text;
  int calls = 0;
  const auto outputs = run_sample_shared(model, micro.tokenizer, pointers(setups), prompt, QueryMode::Aware,
                                         DecodeOptions{4, false}, nullptr, [&] { return ++calls == 2; });
  for (const auto& o : outputs) EXPECT_FALSE(o.has_value());
}

}  // namespace
}  // namespace kvc
