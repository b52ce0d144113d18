// The evaluation harness in-process: the two query protocols, prompt truncation, the needle scorer,
// the resumable result store, sweep planning and reports, and needle retrieval on real models.
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include "harness/compression_curve.h"
#include "harness/gnuplot.h"
#include "harness/needle_report.h"
#include "harness/result_store.h"
#include "harness/sweep_cell_spec.h"
#include "harness/sweep_plan.h"
#include "harness/sweep_report.h"
#include "harness/task_eval.h"
#include "press/press_registry.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "tasks/haystack.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {
namespace {

struct Loaded {
  std::shared_ptr<LlamaModel> model;
  Tokenizer tokenizer;
};

Loaded& load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Loaded>> cache;
  auto& slot = cache[name];
  if (!slot) {
    at::set_num_threads(2);
    const std::string dir = test::model_dir(name);
    slot = std::make_unique<Loaded>(Loaded{LlamaModel::load(dir), Tokenizer::load(dir + "/tokenizer.model")});
  }
  return *slot;
}

// LongBench's pred.py: tokens[:half] + tokens[-half:] with half = int(max_length / 2), over the whole prompt.
TEST(Harness, MiddleCutKeepsHalfOfTheLimitAtEachEndOfTheWholePrompt) {
  const PromptTokens prompt{{1, 2, 3, 4, 5}, {6, 7}};
  PromptTokens cut = cut_prompt_middle(prompt, 4);
  EXPECT_EQ(cut.context, (std::vector<int>{1, 2}));
  EXPECT_EQ(cut.question, (std::vector<int>{6, 7}));
  EXPECT_EQ(cut.dropped, 3);
  cut = cut_prompt_middle(prompt, 5);  // an odd limit keeps 2 * int(5 / 2) = 4 tokens, as LongBench
  EXPECT_EQ(cut.context, (std::vector<int>{1, 2}));
  EXPECT_EQ(cut.dropped, 3);
  cut = cut_prompt_middle(prompt, 6);  // the tail reaches into the context
  EXPECT_EQ(cut.context, (std::vector<int>{1, 2, 3, 5}));
  EXPECT_EQ(cut.question, (std::vector<int>{6, 7}));
  // A question longer than the kept tail loses its start (repobench-p's long code input).
  cut = cut_prompt_middle(PromptTokens{{1, 2, 3}, {4, 5, 6, 7, 8, 9}}, 4);
  EXPECT_EQ(cut.context, (std::vector<int>{1, 2}));
  EXPECT_EQ(cut.question, (std::vector<int>{8, 9}));
  EXPECT_EQ(cut_prompt_middle(prompt, 7).context, prompt.context);  // fits: unchanged
  EXPECT_EQ(cut_prompt_middle(prompt, 7).dropped, 0);
}

TEST(Harness, NeedleAnswerNeedsTheExactFirstNumber) {
  EXPECT_TRUE(needle_answer_correct(" 40721.", "40721"));
  EXPECT_TRUE(needle_answer_correct(" 40721 is the", "40721"));
  EXPECT_FALSE(needle_answer_correct(" 4072", "40721"));
  EXPECT_FALSE(needle_answer_correct(" 407219", "40721"));
  EXPECT_FALSE(needle_answer_correct(" 1 40721", "40721"));
  EXPECT_FALSE(needle_answer_correct(" the ship", "40721"));
}

TEST(Harness, SampleSeedDependsOnCoordinatesOnly) {
  EXPECT_EQ(sample_seed(3, "needle:256:0.5:0"), sample_seed(3, "needle:256:0.5:0"));
  EXPECT_NE(sample_seed(3, "needle:256:0.5:0"), sample_seed(3, "needle:256:0.5:1"));
  EXPECT_NE(sample_seed(3, "needle:256:0.5:0"), sample_seed(4, "needle:256:0.5:0"));
}

TEST(ResultStore, ResumesAndDropsATornLastLine) {
  const std::string path = test::make_temp_dir("kvc-store") + "/r.jsonl";
  {
    ResultStore s(path);
    EXPECT_TRUE(s.records().empty());
    s.append({{"cell", "a"}, {"v", 1}});
    s.append({{"cell", "b"}, {"v", 2}});
  }
  const std::string good = read_text_file(path);
  EXPECT_EQ(std::count(good.begin(), good.end(), '\n'), 2);
  // A run killed mid-write leaves half a line.
  { std::ofstream(path, std::ios::app) << "{\"cell\": \"c\", \"v\""; }
  {
    ResultStore s(path);
    EXPECT_EQ(s.records().size(), 2u);
    EXPECT_TRUE(s.has("a") && s.has("b") && !s.has("c"));
    EXPECT_EQ(s.dropped_torn_lines(), 1u);
    EXPECT_EQ(read_text_file(path), good);  // the torn bytes are gone, so appends start on a fresh line
    s.append({{"cell", "c"}, {"v", 3}});
  }
  ResultStore again(path);
  EXPECT_EQ(again.records().size(), 3u);
  EXPECT_EQ(again.records()[2]["v"], 3);
  EXPECT_EQ(again.dropped_torn_lines(), 0u);
}

// A resumed sweep looks up earlier records between appends: each lookup must see the record as written,
// however many appends moved the records in memory, and a key written twice gives its last record.
TEST(ResultStore, FindGivesTheLastRecordOfAKeyAcrossAppends) {
  const std::string path = test::make_temp_dir("kvc-store-find") + "/samples.jsonl";
  {
    ResultStore s(path, "sample");
    s.append({{"sample", "a"}, {"v", 1}});
    s.append({{"sample", "b"}, {"v", 2}});
  }
  ResultStore s(path, "sample");
  for (int i = 0; i < 1000; ++i) {
    s.append({{"sample", "new " + std::to_string(i)}, {"v", i}});
    const nlohmann::json* a = s.find("a");
    ASSERT_NE(a, nullptr);
    ASSERT_EQ((*a)["v"], 1) << "after " << i + 1 << " appends";
    ASSERT_EQ((*s.find("new " + std::to_string(i)))["v"], i);
  }
  EXPECT_EQ(s.find("c"), nullptr);
  s.append({{"sample", "a"}, {"v", 7}});
  EXPECT_EQ((*s.find("a"))["v"], 7);
  EXPECT_EQ((*ResultStore(path, "sample").find("a"))["v"], 7);
}

TEST(ResultStore, CorruptMiddleLineIsAnErrorWithFileAndLine) {
  const std::string path = test::make_temp_dir("kvc-store") + "/r.jsonl";
  test::write_bytes(path, "{\"cell\":\"a\"}\nnot json\n{\"cell\":\"b\"}\n");
  try {
    ResultStore s(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2:"), std::string::npos) << e.what();
  }
}

TEST(SweepPlan, MethodsTimesRatiosPlusOneBaselinePerTask) {
  const std::vector<std::string> registered{"none", "snapkv", "h2o"};
  const auto methods = resolve_methods({"none,snapkv:window=32,kernel=5,h2o"}, registered);
  EXPECT_EQ(methods, (std::vector<std::string>{"none", "snapkv:window=32,kernel=5", "h2o"}));
  EXPECT_EQ(resolve_methods({"all"}, registered), registered);
  EXPECT_EQ(resolve_methods({"h2o,all"}, registered, {"none", "snapkv"}),
            (std::vector<std::string>{"h2o", "none", "snapkv"}));
  EXPECT_THROW(resolve_methods({"snapkv,bogus"}, registered), Error);
  const auto cells = plan_sweep({"kl", "needle"}, methods, {0.25, 0.5, 0});
  ASSERT_EQ(cells.size(), 2u * (1 + 2 * 2));
  EXPECT_EQ(cells[0].key(), "kl|none|0");
  EXPECT_EQ(cells[1].key(), "kl|snapkv:window=32,kernel=5|0.25");
  EXPECT_EQ(cells[5].key(), "needle|none|0");
  EXPECT_THROW(plan_sweep({"kl"}, methods, {1.0}), Error);
  EXPECT_THROW(check_task_names({"kl", "nedle"}, {"kl", "needle"}), Error);
  // A method that sizes itself is one cell at ratio 0, whatever the ratios.
  const auto sized = plan_sweep({"needle"}, {"none", "snapkv", "think:channels=0.5"}, {0.25, 0.5},
                                [](const std::string& spec) { return method_name(spec) == "think"; });
  ASSERT_EQ(sized.size(), 4u);
  EXPECT_EQ(sized[2].key(), "needle|snapkv|0.5");
  EXPECT_EQ(sized[3].key(), "needle|think:channels=0.5|0");
}

// duo_attention sizes itself by its streaming= share; named without it, a ratio sizes it, so a sweep gives it a
// cell per ratio.
TEST(SweepPlan, DuoAttentionWithoutItsStreamingShareTakesTheRatios) {
  EXPECT_TRUE(press_spec_sizes_itself("duo_attention:streaming=0.5"));
  EXPECT_FALSE(press_spec_sizes_itself("duo_attention"));
  EXPECT_FALSE(press_spec_sizes_itself("duo_attention:sinks=4"));
  EXPECT_TRUE(press_spec_sizes_itself("think"));
  EXPECT_TRUE(press_spec_sizes_itself("simlayerkv:threshold=0.9"));
  EXPECT_FALSE(press_spec_sizes_itself("snapkv"));
  const auto cells = plan_sweep({"needle"}, {"none", "duo_attention", "duo_attention:streaming=0.5"}, {0.25, 0.5},
                                press_spec_sizes_itself);
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[1].key(), "needle|duo_attention|0.25");
  EXPECT_EQ(cells[2].key(), "needle|duo_attention|0.5");
  EXPECT_EQ(cells[3].key(), "needle|duo_attention:streaming=0.5|0");
}

// --method-spec pins a bare method's cells to a spec of the same method; the key keeps the bare name.
TEST(SweepPlan, MethodSpecPinsABareMethodToItsSpec) {
  const std::vector<std::string> registered{"none", "snapkv", "dynamickv"};
  const auto pins = parse_method_specs({"dynamickv=dynamickv:window=32,kernel=5,m=2,rmax=2"}, registered);
  ASSERT_EQ(pins.size(), 1u);
  EXPECT_EQ(pinned_press("dynamickv", pins), "dynamickv:window=32,kernel=5,m=2,rmax=2");
  EXPECT_EQ(pinned_press("dynamickv:rmax=3", pins), "dynamickv:rmax=3");  // an explicit spec runs as given
  EXPECT_EQ(pinned_press("snapkv", pins), "snapkv");
  const auto cells = plan_sweep({"kl"}, resolve_methods({"all"}, registered), {0.5});
  EXPECT_EQ(cells.back().key(), "kl|dynamickv|0.5");
  EXPECT_EQ(pinned_press(cell_compression(cells.back()).press, pins), "dynamickv:window=32,kernel=5,m=2,rmax=2");
  for (const char* bad : {"dynamickv", "=dynamickv:m=2", "dynamickv=", "bogus=bogus:m=2", "dynamickv=snapkv:window=8",
                          "dynamickv:m=2=dynamickv"}) {
    EXPECT_THROW(parse_method_specs({bad}, registered), Error) << bad;
  }
  EXPECT_THROW(parse_method_specs({"dynamickv=dynamickv:m=2", "dynamickv=dynamickv:m=3"}, registered), Error);
}

TEST(SweepPlan, LowRankRetrievalAndTypedRowsNameTheCompressionTheyBuild) {
  ExtraRows rows;
  rows.retrieval = {"adaptive:budget=32"};
  rows.lowrank = {"dir/b.safetensors:ranks=8"};
  rows.lowrank_presses = {"none", "snapkv:window=8"};
  rows.typed = {"q8_0", "f16"};
  rows.typed_presses = {"h2o"};
  const auto cells = extra_cells("kl", rows, {0, 0.5, 0.9});
  ASSERT_EQ(cells.size(), 1u + 1 + 2 + 2 + 4);  // "none" combines with nothing; ratio 0 is a row alone
  EXPECT_EQ(cells[0].key(), "kl|retrieval/adaptive:budget=32|0");
  EXPECT_EQ(cells[1].key(), "kl|lowrank/dir/b.safetensors:ranks=8|0");
  EXPECT_EQ(cells[3].key(), "kl|snapkv:window=8+lowrank/dir/b.safetensors:ranks=8|0.9");

  const CompressionSpec retrieval = cell_compression(cells[0]);
  EXPECT_EQ(retrieval.retrieval, "adaptive:budget=32");
  EXPECT_TRUE(retrieval.lowrank_file.empty());
  const CompressionSpec alone = cell_compression(cells[1]);
  EXPECT_EQ(alone.lowrank_file, "dir/b.safetensors:ranks=8");
  EXPECT_EQ(alone.press, "none");
  EXPECT_EQ(alone.ratio, 0);
  const CompressionSpec both = cell_compression(cells[3]);
  EXPECT_EQ(both.press, "snapkv:window=8");
  EXPECT_EQ(both.ratio, 0.9);
  EXPECT_EQ(both.lowrank_file, "dir/b.safetensors:ranks=8");
  EXPECT_EQ(cells[4].key(), "kl|cache/q8_0|0");
  EXPECT_EQ(cells[5].key(), "kl|cache/f16|0");
  EXPECT_EQ(cells[9].key(), "kl|h2o+cache/f16|0.9");
  const CompressionSpec typed = cell_compression(cells[4]);
  EXPECT_EQ(typed.cache_type, "q8_0");
  EXPECT_EQ(typed.press, "none");
  EXPECT_TRUE(typed.lowrank_file.empty() && typed.retrieval.empty());
  const CompressionSpec typed_press = cell_compression(cells[9]);
  EXPECT_EQ(typed_press.press, "h2o");
  EXPECT_EQ(typed_press.ratio, 0.9);
  EXPECT_EQ(typed_press.cache_type, "f16");
  const CompressionSpec press = cell_compression(SweepCell{"kl", "h2o", 0.25});
  EXPECT_EQ(press.press, "h2o");
  EXPECT_EQ(press.ratio, 0.25);
  EXPECT_TRUE(press.lowrank_file.empty() && press.retrieval.empty() && press.cache_type.empty());
}

nlohmann::json fake_record(const std::string& task, const std::string& method, double ratio, double score) {
  return {
      {"cell", task + method + std::to_string(ratio)},
      {"task", task},
      {"method", method},
      {"ratio", ratio},
      {"result", {{"score", score}, {"metric", "accuracy"}, {"higher_is_better", true}, {"compression_ratio", ratio}}},
      {"metadata", {{"wall_seconds", 1.5}}}};
}

TEST(SweepReport, PivotTableAndPlots) {
  nlohmann::json on_storage = fake_record("needle", "retrieval/adaptive", 0, 0.5);
  on_storage["result"]["ram_ratio"] = 0.8;  // a cache on storage holds less in RAM than its payload
  const std::vector<nlohmann::json> records{fake_record("needle", "none", 0, 1.0),
                                            fake_record("needle", "fake", 0.5, 0.75),
                                            fake_record("needle", "fake", 0.9, 0.25), on_storage};
  const std::string md = sweep_markdown(records);
  EXPECT_NE(md.find("| method \\ ratio | 0 | 0.5 | 0.9 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| none | 1 |  |  |"), std::string::npos) << md;
  EXPECT_NE(md.find("| fake | 1 | 0.75 | 0.25 |"), std::string::npos) << md;  // starts at the baseline
  const std::string csv = to_csv(sweep_table(records));
  EXPECT_NE(csv.find("needle,fake,0.9,0.25,accuracy,yes,0.9,0.9,1.5,0,\n"), std::string::npos) << csv;
  EXPECT_NE(csv.find("needle,retrieval/adaptive,0,0.5,accuracy,yes,0,0.8,1.5,0,\n"), std::string::npos) << csv;
  const std::string dir = test::make_temp_dir("kvc-report");
  const auto pngs = write_sweep_report(dir, records);
  if (gnuplot_available()) {
    ASSERT_EQ(pngs.size(), 1u);
    EXPECT_EQ(read_text_file(pngs[0]).substr(1, 3), "PNG");
  }
}

nlohmann::json with_samples(nlohmann::json record, const std::vector<double>& scores) {
  double sum = 0;
  for (double v : scores) {
    record["result"]["samples"].push_back({{"score", v}});
    sum += v;
  }
  record["result"]["score"] = sum / static_cast<double>(scores.size());
  return record;
}

TEST(SweepReport, CellsCarryTheirSampleCountAndStandardError) {
  // Scores 1, 0, 1, 0: mean 0.5, sample variance 1/3, standard error sqrt(1/3 / 4) = 0.288675.
  const std::vector<nlohmann::json> same_n{with_samples(fake_record("vt", "none", 0, 0), {1, 1, 1, 1}),
                                           with_samples(fake_record("vt", "snapkv", 0.5, 0), {1, 0, 1, 0})};
  const std::string md = sweep_markdown(same_n);
  EXPECT_NE(md.find("mean ± standard error over 4 samples per cell"), std::string::npos) << md;
  EXPECT_NE(md.find("| snapkv | 1 ± 0 | 0.5 ± 0.2887 |"), std::string::npos) << md;
  const std::string csv = to_csv(sweep_table(same_n));
  EXPECT_NE(csv.find("vt,snapkv,0.5,0.5,accuracy,yes,0.5,0.5,1.5,4,0.288675\n"), std::string::npos) << csv;
  // A cell with fewer samples (an interrupted sweep) says its own n, and one sample has no error.
  const std::vector<nlohmann::json> mixed{with_samples(fake_record("vt", "none", 0, 0), {1, 0}),
                                          with_samples(fake_record("vt", "snapkv", 0.5, 0), {1})};
  const std::string mixed_md = sweep_markdown(mixed);
  EXPECT_NE(mixed_md.find("mean ± standard error over n samples"), std::string::npos) << mixed_md;
  EXPECT_NE(mixed_md.find("| snapkv | 0.5 ± 0.5 (n=2) | 1 (n=1) |"), std::string::npos) << mixed_md;
  // ppl and kl cells: one number over their windows.
  nlohmann::json ppl = fake_record("ppl", "none", 0, 12.5);
  ppl["result"]["windows"] = 8;
  EXPECT_NE(sweep_markdown({ppl}).find("8 windows per cell"), std::string::npos) << sweep_markdown({ppl});
}

// KVCompose's summaries on hand-made curves, against the trapezoids and crossings worked out by hand.
TEST(CompressionCurve, AreaAndAchievableCompressionOnHandMadeCurves) {
  // (0, 1), (0.5, 0.5), (1, 0): trapezoids 0.375 + 0.125 over a span of 1.
  EXPECT_DOUBLE_EQ(*normalised_area({{0, 1}, {0.5, 0.5}, {1, 0}}), 0.5);
  // Uneven ratios: 0.1 × 1 + 0.8 × (1 + 0.2) / 2 = 0.58, over a span of 0.9.
  EXPECT_NEAR(*normalised_area({{0, 1}, {0.1, 1}, {0.9, 0.2}}), 0.58 / 0.9, 1e-12);
  EXPECT_FALSE(normalised_area({{0, 1}}));
  EXPECT_FALSE(normalised_area({{0.5, 1}, {0.2, 1}}));  // unsorted
  // Relative drops 0, 0.05, 0.15, 0.5: 10% is crossed halfway from 0.25 to 0.5; 20% a seventh of the way
  // from 0.5 to 0.75 ((0.2 − 0.15) / (0.5 − 0.15)).
  const std::vector<CurvePoint> one{{0, 1.0}, {0.25, 0.95}, {0.5, 0.85}, {0.75, 0.5}};
  EXPECT_NEAR(achievable_compression({one}, 0.10)->ratio, 0.375, 1e-12);
  EXPECT_NEAR(achievable_compression({one}, 0.20)->ratio, 0.5 + 0.25 / 7, 1e-12);
  EXPECT_FALSE(achievable_compression({one}, 0.10)->at_least);
  // Never beyond the tolerance: the largest ratio measured, as a lower bound.
  const auto whole = achievable_compression({one}, 0.6);
  EXPECT_EQ(whole->ratio, 0.75);
  EXPECT_TRUE(whole->at_least);
  // Two tasks average their relative drops (the second halves: 0, 0.5, 0.5, 0.5 → means 0, 0.275, ...):
  // 20% is crossed at 0.25 × 0.2 / 0.275 of the first interval. A task scoring 0 uncompressed is left out.
  const std::vector<CurvePoint> other{{0, 0.4}, {0.25, 0.2}, {0.5, 0.2}, {0.75, 0.2}};
  const std::vector<CurvePoint> zero{{0, 0}, {0.25, 0}, {0.5, 0}, {0.75, 0}};
  EXPECT_NEAR(achievable_compression({one, other, zero}, 0.20)->ratio, 0.25 * 0.2 / 0.275, 1e-12);
  EXPECT_FALSE(achievable_compression({zero}, 0.2));
  // A curve that dips past the tolerance and recovers: the first crossing counts.
  EXPECT_NEAR(achievable_compression({{{0, 1}, {0.5, 0.6}, {0.9, 1}}}, 0.2)->ratio, 0.25, 1e-12);
}

TEST(SweepReport, SummarisesEachMethodsCurveOverTheTasks) {
  const std::vector<nlohmann::json> records{
      fake_record("needle", "none", 0, 1.0),
      fake_record("needle", "fake", 0.25, 0.95),
      fake_record("needle", "fake", 0.5, 0.85),
      fake_record("needle", "fake", 0.75, 0.5),
      fake_record("needle", "half", 0.25, 0.5),    // no cell at 0.5 and 0.75: no whole curve
      fake_record("needle", "lowrank/b", 0, 0.9),  // compressed at ratio 0 already
      fake_record("needle", "fake+cache/q4_0", 0.25, 0.9),
      fake_record("needle", "fake+cache/q4_0", 0.5, 0.8),
      fake_record("needle", "fake+cache/q4_0", 0.75, 0.4)};
  const std::string md = sweep_markdown(records);
  EXPECT_NE(md.find("### Across the compression range"), std::string::npos) << md;
  // AUC: (0.25 × 1.95 + 0.25 × 1.8 + 0.25 × 1.35) / 2 / 0.75 = 0.85.
  EXPECT_NE(md.find("| fake | 0.85 | 0.375 | 0.536 |"), std::string::npos) << md;
  EXPECT_NE(md.find("| half | 1 | 0.5 |  |  |"), std::string::npos) << md;
  EXPECT_EQ(md.rfind("| half |"), md.find("| half |")) << md;  // only in the task's own table
  EXPECT_EQ(md.rfind("| lowrank/b |"), md.find("| lowrank/b |")) << md;
  EXPECT_EQ(md.rfind("| fake+cache/q4_0 |"), md.find("| fake+cache/q4_0 |")) << md;
}

TEST(Tables, CsvQuotingAndMarkdownEscaping) {
  const Table t{{"a", "b"}, {{"x,y", "say \"hi\""}, {"p|q", "1"}}};
  EXPECT_EQ(to_csv(t), "a,b\n\"x,y\",\"say \"\"hi\"\"\"\np|q,1\n");
  EXPECT_EQ(to_markdown(t), "| a | b |\n|---|---|\n| x,y | say \"hi\" |\n| p\\|q | 1 |\n");
  EXPECT_EQ(format_number(0.5000), "0.5");
  EXPECT_EQ(format_number(2.0), "2");
}

TEST(Harness, PromptTruncationRefusesOrCutsTheMiddleOfThePrompt) {
  Loaded& m = load("stories260K");
  std::string context;
  for (int i = 0; i < 300; ++i) context += "Tom saw a big dog. ";
  const std::string question = "\nWhat did Tom see?";
  EXPECT_THROW(tokenize_prompt(m.tokenizer, *m.model, context, question, 8, Truncation::Refuse, "s1"), Error);
  const PromptTokens p = tokenize_prompt(m.tokenizer, *m.model, context, question, 8, Truncation::Middle, "s1");
  const int64_t limit = m.model->config().max_position_embeddings;
  EXPECT_EQ(p.size() + 8, limit);
  EXPECT_GT(p.dropped, 0);
  EXPECT_EQ(p.context.front(), m.model->config().bos_token_id);
  EXPECT_EQ(p.question, m.tokenizer.encode(question));  // the question survives whole
  const std::vector<int> full = m.tokenizer.encode_prompt(context);
  EXPECT_EQ(p.context.back(), full.back());  // the tail of the context is kept
}

// With no compression the two protocols feed the same tokens into the same cache, so their greedy
// answers must agree; the agnostic prefill + question logits must also match one full forward.
TEST(Harness, QueryAwareAndAgnosticAgreeWithoutCompression) {
  Loaded& m = load("stories260K");
  const std::string haystack =
      read_text_file(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 20000);
  EvalContext aware{*m.model, m.tokenizer, QueryMode::Aware, Truncation::Refuse};
  EvalContext agnostic{*m.model, m.tokenizer, QueryMode::Agnostic, Truncation::Refuse};
  NeedleGridOptions grid;
  grid.spec = passkey_needle_spec();
  grid.haystack = haystack;
  grid.samples = 2;
  const CacheSetup none;
  for (double depth : {0.0, 1.0}) {
    const NeedleCell a = run_needle_cell(aware, none, grid, 200, depth);
    const NeedleCell b = run_needle_cell(agnostic, none, grid, 200, depth);
    ASSERT_EQ(a.samples.size(), 2u);
    for (size_t i = 0; i < a.samples.size(); ++i) {
      EXPECT_EQ(a.samples[i].prediction, b.samples[i].prediction);
      EXPECT_EQ(a.samples[i].score, b.samples[i].score);
      EXPECT_LE(a.samples[i].prompt_tokens, 200);
      EXPECT_DOUBLE_EQ(a.samples[i].compression_ratio, 0.0);
    }
  }
  const auto ctx_ids = m.tokenizer.encode(haystack.substr(0, 600));
  const auto q_ids = m.tokenizer.encode("\nWhat is the pass key? The pass key is");
  std::vector<int> all = ctx_ids;
  all.insert(all.end(), q_ids.begin(), q_ids.end());
  KVCache one = m.model->new_cache(), two = m.model->new_cache();
  const at::Tensor full = m.model->forward(all, one, {false, nullptr});
  m.model->forward(ctx_ids, two, {false, nullptr});
  const at::Tensor split = m.model->forward(q_ids, two, {false, nullptr});
  EXPECT_LT((full - split).abs().max().item<float>(), 1e-4);
}

TEST(Harness, NeedleGridRunsEndToEndOnStories260K) {
  Loaded& m = load("stories260K");
  EvalContext ctx{*m.model, m.tokenizer, QueryMode::Aware, Truncation::Refuse};
  NeedleGridOptions opt;
  opt.haystack = read_text_file(test::data_file("tinystories/tinystories_excerpt_30k.txt")).substr(0, 8000);
  opt.lengths = {128, 256};
  opt.depths = {0.0, 1.0};
  opt.samples = 1;
  NeedleGrid grid{opt.lengths, opt.depths, {}};
  for (auto l : opt.lengths)
    for (double d : opt.depths) grid.cells.push_back(run_needle_cell(ctx, CacheSetup{}, opt, l, d));
  EXPECT_GE(grid.overall_accuracy(), 0.0);
  EXPECT_LE(grid.overall_accuracy(), 1.0);
  EXPECT_EQ(grid.sample_count(), 4);
  const std::string dir = test::make_temp_dir("kvc-needle");
  const std::string png = write_needle_report(dir, "stories260K", grid, {{"model", "stories260K"}});
  const auto j = nlohmann::json::parse(read_text_file(dir + "/needle_grid.json"));
  EXPECT_EQ(j["accuracy_grid"].size(), 2u);     // depths
  EXPECT_EQ(j["accuracy_grid"][0].size(), 2u);  // lengths
  EXPECT_EQ(j["cells"].size(), 4u);
  if (gnuplot_available()) EXPECT_EQ(read_text_file(png).substr(1, 3), "PNG");
}

// kvc-micro-lm was trained on this needle form and retrieves it ~95% of the time at 512 tokens
// (data/models/kvc-micro-lm/README.md).
TEST(Harness, MicroLmRetrievesNeedlesAt512Tokens) {
  Loaded& m = load("kvc-micro-lm");
  EvalContext ctx{*m.model, m.tokenizer, QueryMode::Aware, Truncation::Refuse};
  NeedleGridOptions opt;
  opt.haystack = load_haystack({test::data_file("pg_essays/avg.txt"), test::data_file("pg_essays/boss.txt")});
  opt.samples = 2;
  opt.seed = 7;
  int correct = 0, total = 0;
  for (double depth : {0.1, 0.3, 0.5, 0.7, 0.9}) {
    const NeedleCell cell = run_needle_cell(ctx, CacheSetup{}, opt, 512, depth);
    for (const auto& s : cell.samples) {
      correct += s.score > 0.5;
      ++total;
      EXPECT_LE(s.prompt_tokens, 512);
      EXPECT_GE(s.prompt_tokens, 440);  // the budget is used (up to a sentence of slack)
    }
  }
  EXPECT_EQ(total, 10);
  EXPECT_GE(correct, 6) << correct << "/" << total;  // >= 60%
  std::printf("kvc-micro-lm needle at 512 tokens: %d/%d correct\n", correct, total);
}

}  // namespace
}  // namespace kvc
