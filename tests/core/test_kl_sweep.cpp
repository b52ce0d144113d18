// KL / perplexity cells run window by window with one reference run per window and one shared prefill
// for the presses (harness/kl_sweep.h), against evaluate_kl run for each setup on its own: every field of
// every result equal, including the cells that cannot share a prefill; a checkpointed window is read back.
#include <gtest/gtest.h>

#include "compression/compression_spec.h"
#include "harness/kl_sweep.h"
#include "press/press_registry.h"
#include "support/paths.h"
#include "support/press_names.h"
#include "support/run_command.h"
#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace kvc {
namespace {

void expect_same(const KlResult& a, const KlResult& b) {
  EXPECT_EQ(a.mean_kl, b.mean_kl);
  EXPECT_EQ(a.max_kl, b.max_kl);
  EXPECT_EQ(a.top1_agreement, b.top1_agreement);
  EXPECT_EQ(a.ppl_reference, b.ppl_reference);
  EXPECT_EQ(a.ppl_compressed, b.ppl_compressed);
  EXPECT_EQ(a.tokens_scored, b.tokens_scored);
  EXPECT_EQ(a.windows, b.windows);
  EXPECT_EQ(a.reference_kv_bytes, b.reference_kv_bytes);
  EXPECT_EQ(a.compressed_kv_bytes, b.compressed_kv_bytes);
  EXPECT_EQ(a.reference_window_kv_bytes, b.reference_window_kv_bytes);
  EXPECT_EQ(a.compressed_window_kv_bytes, b.compressed_window_kv_bytes);
  EXPECT_EQ(a.compressed_ram_bytes, b.compressed_ram_bytes);
}

TEST(KlSweep, EveryCellEqualsItsOwnEvaluateKlAndResumesFromCheckpointedWindows) {
  const auto model = LlamaModel::load(test::model_dir("kvc-micro-lm"));
  const Tokenizer tokenizer = Tokenizer::load(test::model_dir("kvc-micro-lm") + "/tokenizer.model");
  const std::vector<int> ids = tokenizer.encode_prompt(test::slurp(test::data_file("pg_essays/addiction.txt")));
  KlOptions options;
  options.plan.window = 160;
  options.plan.max_windows = 3;
  options.chunk = 7;  // the second half fed in uneven pieces, as --chunk does

  // kvzip (a reconstruction of the prompt fed after it) and kvcompose's default (the prompt repeated, as
  // kvcompose_unstructured's) score the prompt with tokens of their own: each set of tokens is a shared
  // prefill of its own.
  std::vector<std::string> specs{"none"};
  for (const auto& name : test::ratio_presses()) specs.push_back(name);
  specs.push_back("kvcompose:task=window");  // shares the plain prefill
  specs.push_back("kvzip:layerwise=1");      // shares kvzip's
  std::vector<SweepCell> cells;
  std::vector<CacheSetup> setups;
  for (const auto& spec : specs) {
    CompressionSpec c;
    c.press = spec;
    c.ratio = spec == "none" ? 0.0 : 0.5;
    cells.push_back({"kl", spec, c.ratio});
    setups.push_back(build_cache_setup(c, *model));
  }
  const std::string dir = test::make_temp_dir("kvc-kl-sweep");
  ResultStore checkpoint(dir + "/samples.jsonl", "sample");
  int windows = 0;
  const KlSweepOutcome swept =
      run_kl_sweep(*model, ids, options, cells, setups, checkpoint, "s", true, [&] { ++windows; });
  ASSERT_TRUE(swept.complete);
  EXPECT_EQ(windows, 3);
  // Per window: the reference and three shared prefills (plain, kvzip's reconstruction, KVCompose's repeat).
  EXPECT_EQ(swept.cost.prefills, 3 * 4);
  EXPECT_EQ(swept.cost.shared_outputs, 3 * static_cast<int64_t>(cells.size()));
  ASSERT_EQ(swept.results.size(), cells.size());
  for (size_t c = 0; c < cells.size(); ++c) {
    SCOPED_TRACE(cells[c].method);
    expect_same(swept.results[c], evaluate_kl(*model, ids, options, setups[c], false));
  }
  EXPECT_GT(swept.results[1].mean_kl, 0.0);  // a press at 0.5 changes the predictions

  // The first window's scores checkpointed: a resumed sweep reads them back and runs the other two.
  ResultStore resumed(dir + "/resumed.jsonl", "sample");
  std::vector<nlohmann::json> first;
  for (const auto& r : checkpoint.records())
    if (r["sample"].get<std::string>().find("|window 0") != std::string::npos) first.push_back(r);
  ASSERT_EQ(first.size(), cells.size());
  resumed.append_all(first);
  const KlSweepOutcome again = run_kl_sweep(*model, ids, options, cells, setups, resumed, "s", true);
  ASSERT_TRUE(again.complete);
  EXPECT_EQ(again.cost.prefills, 2 * 4);
  for (size_t c = 0; c < cells.size(); ++c) expect_same(again.results[c], swept.results[c]);

  // Stopped between cells of the second window (Ctrl-C): the first window whole and the second's finished
  // cells are checkpointed, and the resumed sweep runs only the rest, to the same numbers.
  ResultStore stopped(dir + "/stopped.jsonl", "sample");
  size_t asked = 0;
  const size_t asks_per_window = 4 + cells.size();  // before the window, each of its 3 prefills and each cell
  const KlSweepOutcome cut = run_kl_sweep(*model, ids, options, cells, setups, stopped, "s", true, {},
                                          [&] { return asked++ > asks_per_window + 4; });
  EXPECT_FALSE(cut.complete);
  const size_t kept = stopped.records().size();
  EXPECT_GT(kept, cells.size());
  EXPECT_LT(kept, 2 * cells.size());
  const KlSweepOutcome finished = run_kl_sweep(*model, ids, options, cells, setups, stopped, "s", true);
  ASSERT_TRUE(finished.complete);
  EXPECT_EQ(finished.cost.shared_outputs, static_cast<int64_t>(3 * cells.size() - kept));
  for (size_t c = 0; c < cells.size(); ++c) expect_same(finished.results[c], swept.results[c]);

  // Without sharing the prefill every cell prefills alone and still gets the same numbers.
  ResultStore alone(dir + "/alone.jsonl", "sample");
  const KlSweepOutcome unshared = run_kl_sweep(*model, ids, options, cells, setups, alone, "s", false);
  EXPECT_EQ(unshared.cost.prefills, 3 * static_cast<int64_t>(1 + cells.size()));
  for (size_t c = 0; c < cells.size(); ++c) expect_same(unshared.results[c], swept.results[c]);
}

// A retrieval cache picks entries for each new token; a pass of several tokens attends to all of them.
// So a kl schedule of several tokens per pass is refused (it would score KL 0), and one token per pass
// measures what the retrieval leaves out, equal to evaluate_kl run alone.
TEST(KlSweep, RetrievalCellsNeedOneTokenPerPass) {
  const auto model = LlamaModel::load(test::model_dir("kvc-micro-lm"));
  const Tokenizer tokenizer = Tokenizer::load(test::model_dir("kvc-micro-lm") + "/tokenizer.model");
  const std::vector<int> ids = tokenizer.encode_prompt(test::slurp(test::data_file("pg_essays/addiction.txt")));
  KlOptions options;
  options.plan.window = 160;
  options.plan.max_windows = 2;
  options.chunk = 7;
  CompressionSpec retrieval;
  retrieval.retrieval = "adaptive:budget=16";
  const std::vector<SweepCell> cells{{"kl", "none", 0.0}, {"kl", "retrieval/adaptive:budget=16", 0.0}};
  const std::vector<CacheSetup> setups{build_cache_setup(CompressionSpec{}, *model),
                                       build_cache_setup(retrieval, *model)};
  const std::string dir = test::make_temp_dir("kvc-kl-sweep-retrieval");
  ResultStore refused(dir + "/refused.jsonl", "sample");
  try {
    run_kl_sweep(*model, ids, options, cells, setups, refused, "s", true);
    FAIL() << "a retrieval cell with --chunk 7 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--chunk 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("use --chunk 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(evaluate_kl(*model, ids, options, setups[1], false), Error);
  EXPECT_TRUE(refused.records().empty());  // refused before any window ran

  options.chunk = 1;
  ResultStore checkpoint(dir + "/samples.jsonl", "sample");
  const KlSweepOutcome swept = run_kl_sweep(*model, ids, options, cells, setups, checkpoint, "s", true);
  ASSERT_TRUE(swept.complete);
  expect_same(swept.results[1], evaluate_kl(*model, ids, options, setups[1], false));
  EXPECT_GT(swept.results[1].mean_kl, 1e-6);             // 16 entries read of up to 160: the predictions move
  EXPECT_EQ(swept.results[1].compression_ratio(), 0.0);  // every entry is kept, on storage
  EXPECT_GT(swept.results[1].ram_ratio(), 0.0);          // RAM holds less than the payload
}

}  // namespace
}  // namespace kvc
