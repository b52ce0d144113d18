// kvc-eval's harness subcommands as a user runs them: a sweep stopped part-way and resumed, the
// needle grid files, and bad input (malformed JSONL, over-long prompts, unknown task names).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "support/paths.h"
#include "support/run_command.h"
#include "util/files.h"

namespace kvc {
namespace {

using test::bin;
using test::run_command;

const std::string kStories = test::model_dir("stories260K");
const std::string kText = test::data_file("tinystories/tinystories_excerpt_30k.txt");

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(test::slurp(path));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));  // throws on a corrupt line
  return out;
}

void expect_clean_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  ASSERT_FALSE(r.err.empty());
  const std::string last = r.err.substr(r.err.rfind('\n', r.err.size() - 2) + 1);
  EXPECT_NE(last.find("kvc-eval: error: "), std::string::npos) << r.err;
  EXPECT_NE(last.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string sweep_cmd(const std::string& out, const std::string& extra = "") {
  return bin("kvc-eval") + " sweep -m " + kStories + " -t 1 --methods none --tasks ppl,kl,needle,niah_single --file " +
         kText + " --window 64 --max-windows 2 --haystack " + kText +
         " --needle-lengths 128 --needle-depths 0,1 --samples 1 --task-lengths 256 --max-new-tokens 12 --out " + out +
         " --json " + extra;
}

TEST(EvalSweep, StoppedRunResumesWithoutRecomputingFinishedCells) {
  const std::string out = test::make_temp_dir("kvc-sweep");
  auto r = run_command(sweep_cmd(out, "--max-cells 2"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["cells"], 4);
  EXPECT_EQ(summary["ran"], 2);
  EXPECT_FALSE(summary["complete"].get<bool>());
  const auto first = read_jsonl(out + "/results.jsonl");
  ASSERT_EQ(first.size(), 2u);
  const std::string first_bytes = test::slurp(out + "/results.jsonl");

  // A run killed while writing leaves a torn last line; the resume drops it with a warning.
  { std::ofstream(out + "/results.jsonl", std::ios::app) << "{\"cell\":\"needle|none|0\",\"res"; }
  r = run_command(sweep_cmd(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("torn last line"), std::string::npos) << r.err;
  summary = nlohmann::json::parse(r.out);
  EXPECT_EQ(summary["ran"], 2);
  EXPECT_EQ(summary["reused"], 2);
  EXPECT_TRUE(summary["complete"].get<bool>());
  const auto all = read_jsonl(out + "/results.jsonl");
  ASSERT_EQ(all.size(), 4u);
  // Finished cells were not recomputed: their lines (with timestamps and wall times) are byte-identical.
  EXPECT_EQ(test::slurp(out + "/results.jsonl").substr(0, first_bytes.size()), first_bytes);
  std::set<std::string> keys;
  for (const auto& rec : all) {
    keys.insert(rec["cell"].get<std::string>());
    EXPECT_EQ(rec["ratio"], 0.0);
    for (const char* field : {"commit", "model", "model_config_hash", "data_hash", "seed", "threads", "device",
                              "wall_seconds", "peak_rss_bytes", "method"})
      EXPECT_TRUE(rec["metadata"].contains(field)) << field;
    const double score = rec["result"]["score"];
    if (rec["task"] == "kl") EXPECT_EQ(score, 0.0);  // the uncompressed cache is the exact model
    if (rec["task"] == "needle" || rec["task"] == "niah_single") {
      EXPECT_GE(score, 0.0);
      EXPECT_LE(score, 1.0);
    }
  }
  EXPECT_EQ(keys.size(), 4u);

  // A third run has nothing left to do.
  r = run_command(sweep_cmd(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ran"], 0);
  EXPECT_EQ(read_jsonl(out + "/results.jsonl").size(), 4u);
  EXPECT_NE(test::slurp(out + "/results.md").find("### kl"), std::string::npos);
  EXPECT_NE(test::slurp(out + "/results.csv").find("task,method,ratio,score"), std::string::npos);

  // kvc-eval report rewrites the same tables from results.jsonl alone, leaving the results file as it was.
  const std::string md = test::slurp(out + "/results.md"), csv = test::slurp(out + "/results.csv");
  const std::string results_bytes = test::slurp(out + "/results.jsonl");
  std::remove((out + "/results.md").c_str());
  std::remove((out + "/results.csv").c_str());
  r = run_command(bin("kvc-eval") + " report --out-dir " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["cells"], 4);
  EXPECT_EQ(test::slurp(out + "/results.md"), md);
  EXPECT_EQ(test::slurp(out + "/results.csv"), csv);
  EXPECT_EQ(test::slurp(out + "/results.jsonl"), results_bytes);
  expect_clean_error(run_command(bin("kvc-eval") + " report --out-dir " + out + "/nothing-here"),
                     "has no results.jsonl");

  // Cells made under other settings are never mixed in; the error names the flag that differs.
  expect_clean_error(run_command(sweep_cmd(out, "--seed 5")), "holds cells made with --seed 0 (this run: 5)");
}

// Two runs of one sweep on one folder would interleave their records: while a lock holder (here this
// test, through flock(2) as another kvc-eval would) writes results.jsonl, a second run stops before any
// work; a shard, which appends to a file of its own, is not held up.
TEST(EvalSweep, ASecondRunOnTheSameFolderIsRefusedWhileTheFirstWrites) {
  const std::string out = test::make_temp_dir("kvc-sweep-lock");
  const int fd = ::open((out + "/.results.jsonl.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_clean_error(run_command(sweep_cmd(out, "--max-cells 1")), "another run is writing results.jsonl there");
  EXPECT_FALSE(kvc::file_exists(out + "/results.jsonl"));
  const auto shard = run_command(sweep_cmd(out, "--max-cells 1 --shard 1/2"));
  EXPECT_EQ(shard.exit_code, 0) << shard.err;
  ::close(fd);  // the holder ends: the folder is free again
  const auto r = run_command(sweep_cmd(out, "--max-cells 1"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(EvalSweep, CtrlCStopsAfterTheCurrentCellWithValidFiles) {
  const std::string out = test::make_temp_dir("kvc-sweep-int");
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string cmd = sweep_cmd(out) + " >/dev/null 2>" + out + "/err";
    ::execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Interrupt as soon as the first cell is on disk.
  for (int i = 0; i < 600 && test::slurp(out + "/results.jsonl").empty(); ++i) ::usleep(50000);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal";
  const size_t done = read_jsonl(out + "/results.jsonl").size();
  EXPECT_GE(done, 1u);
  if (done < 4) EXPECT_EQ(WEXITSTATUS(status), 130) << test::slurp(out + "/err");
  const auto r = run_command(sweep_cmd(out));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["ran"].get<size_t>(), 4 - done);
  EXPECT_EQ(read_jsonl(out + "/results.jsonl").size(), 4u);
}

// The cells of a results.jsonl by key, without what depends on timing or the prefill mode.
std::map<std::string, nlohmann::json> comparable_cells(const std::string& path) {
  std::map<std::string, nlohmann::json> out;
  for (auto rec : read_jsonl(path)) {
    nlohmann::json result = rec["result"];
    for (auto& sample : result["samples"]) sample.erase("seconds");
    out[rec["cell"].get<std::string>()] = result;
  }
  return out;
}

std::string shared_sweep_cmd(const std::string& out, const std::string& prefill) {
  return bin("kvc-eval") + " sweep -m " + test::model_dir("kvc-micro-lm") +
         " -t 1 --methods all --ratios 0.5,0.9 --tasks needle,niah_single_2,vt --haystack " +
         test::data_file("pg_essays") +
         " --needle-lengths 384 --needle-depths 0.5 --samples 2 --task-lengths 512 --retrieval adaptive:budget=32 "
         "--out-dir " +
         out + " --json --prefill " + prefill;
}

// The presses of --methods all that score a reconstruction or a repeat of the prompt (KVzip, KVCompose's
// default task=repeat): their prefill runs more than the prompt, so they share one prefill per set of
// scoring tokens, not the plain one: KVzip's reconstruction, and the repeated prompt of kvcompose and
// kvcompose_unstructured.
constexpr int kScoredPrefills = 2;

TEST(EvalSweep, OnePrefillPerSampleGivesThePerCellResults) {
  const std::string shared = test::make_temp_dir("kvc-sweep-shared"), alone = test::make_temp_dir("kvc-sweep-alone");
  auto r = run_command(shared_sweep_cmd(shared, "shared"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  // 3 tasks x 2 samples: one plain shared prefill each, one per set of scoring tokens, and the retrieval
  // cell's own; every other cell (2 ratios of each press) takes its prompt from a shared one.
  EXPECT_EQ(summary["prefill"]["prefills"], 6 * (2 + kScoredPrefills));
  EXPECT_EQ(summary["prefill"]["shared_outputs"], 6 * (summary["cells"].get<int>() / 3 - 1));
  r = run_command(shared_sweep_cmd(alone, "per-cell"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto a = comparable_cells(shared + "/results.jsonl"), b = comparable_cells(alone + "/results.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, result] : a) EXPECT_EQ(result, b.at(key)) << key;
  EXPECT_EQ(test::slurp(shared + "/results.md"), test::slurp(alone + "/results.md"));
  // The memory a cell holds in RAM: its payload, except the retrieval cache's, whose entries are on storage.
  for (const auto& [key, result] : a) {
    const double payload = result["compression_ratio"], ram = result["ram_ratio"];
    if (key.find("retrieval/") != std::string::npos) EXPECT_GT(ram, payload + 0.25) << key;
    else EXPECT_EQ(ram, payload) << key;
  }

  // Interrupted after a task's first sample: the cells of that task are not finished, their first
  // sample is checkpointed, and the resumed run reads it back instead of running it.
  const std::string resumed = test::make_temp_dir("kvc-sweep-resumed");
  {
    std::ofstream keep(resumed + "/samples.jsonl");
    for (const auto& line : read_jsonl(shared + "/samples.jsonl")) {
      const std::string key = line["sample"];
      if (key.rfind("needle|", 0) == 0 && key.substr(key.size() - 2) == "|0") keep << line.dump() << "\n";
    }
  }
  r = run_command(shared_sweep_cmd(resumed, "shared"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The needle's first sample is not rerun.
  EXPECT_EQ(nlohmann::json::parse(r.out)["prefill"]["prefills"], 5 * (2 + kScoredPrefills));
  EXPECT_EQ(comparable_cells(resumed + "/results.jsonl"), a);
}

// ppl and kl cells share each window's reference run and the presses' prefill, and still give the
// numbers of cells run alone; the summary counts the prefills saved.
TEST(EvalSweep, TextCellsShareEachWindowsRunsAndGiveThePerCellResults) {
  const auto cmd = [](const std::string& out, const std::string& prefill) {
    return bin("kvc-eval") + " sweep -m " + kStories + " -t 1 --methods all --ratios 0.5 --tasks kl,ppl --file " +
           kText + " --window 96 --max-windows 2 --chunk 5 --out-dir " + out + " --json --prefill " + prefill;
  };
  const std::string shared = test::make_temp_dir("kvc-sweep-text-shared"),
                    alone = test::make_temp_dir("kvc-sweep-text-alone");
  auto r = run_command(cmd(shared, "shared"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto summary = nlohmann::json::parse(r.out);
  const int cells = summary["cells"].get<int>();
  // 2 tasks x 2 windows: the reference, the plain shared prefill and one per set of scoring tokens each;
  // every cell takes its prompt from one of them.
  EXPECT_EQ(summary["prefill"]["prefills"], 4 * (2 + kScoredPrefills));
  EXPECT_EQ(summary["prefill"]["shared_outputs"], 2 * cells);
  r = run_command(cmd(alone, "per-cell"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto a = comparable_cells(shared + "/results.jsonl"), b = comparable_cells(alone + "/results.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, result] : a) EXPECT_EQ(result, b.at(key)) << key;
  EXPECT_GT(a.at("kl|snapkv|0.5")["score"].get<double>(), 0.0);
}

// Typed rows: each cache type prefills once per window for its presses, and every typed cell equals
// kvc-eval kl run alone with -ctk/-ctv of that type.
TEST(EvalSweep, TypedCacheRowsEqualTheirOwnRunsWithOnePrefillPerType) {
  const std::string micro = test::model_dir("kvc-micro-lm"), out = test::make_temp_dir("kvc-sweep-typed");
  const std::string common = " -m " + micro + " -t 1 -f " + kText + " -c 128 --max-windows 2 --json";
  auto r = run_command(bin("kvc-eval") + " sweep" + common +
                       " --methods none --ratios 0.5 --tasks kl "
                       "--typed-cache q8_0,f16 --typed-cache-press snapkv --out-dir " +
                       out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 windows: the reference, and one prefill each for the f32 cache, q8_0 and f16.
  EXPECT_EQ(nlohmann::json::parse(r.out)["prefill"]["prefills"], 8);
  std::map<std::string, nlohmann::json> cells;
  for (const auto& line : read_jsonl(out + "/results.jsonl")) cells[line["method"].get<std::string>()] = line["result"];
  ASSERT_EQ(cells.size(), 5u);
  for (const std::string type : {"q8_0", "f16"}) {
    for (const std::string press : {"", "snapkv"}) {
      SCOPED_TRACE(type + " " + press);
      const auto own = run_command(bin("kvc-eval") + " kl" + common + " -ctk " + type + " -ctv " + type +
                                   (press.empty() ? "" : " --press " + press + " --ratio 0.5"));
      ASSERT_EQ(own.exit_code, 0) << own.err;
      const auto alone = nlohmann::json::parse(own.out);
      const auto& cell = cells.at(press.empty() ? "cache/" + type : press + "+cache/" + type);
      EXPECT_DOUBLE_EQ(cell["kl"].get<double>(), alone["kl"].get<double>());
      EXPECT_DOUBLE_EQ(cell["compression_ratio"].get<double>(), alone["compression_ratio"].get<double>());
    }
  }
  EXPECT_GT(cells.at("cache/q8_0")["compression_ratio"].get<double>(),
            cells.at("cache/f16")["compression_ratio"].get<double>());
  EXPECT_GT(cells.at("cache/q8_0")["kl"].get<double>(), 0.0);

  const std::string base = bin("kvc-eval") + " sweep" + common + " --methods none --tasks kl --out-dir ";
  expect_clean_error(run_command(base + test::make_temp_dir("kvc-sweep-typed-bad") + " --typed-cache q9_0"),
                     "unknown cache type 'q9_0'");
  expect_clean_error(run_command(base + test::make_temp_dir("kvc-sweep-typed-bad") + " --typed-cache auto"),
                     "--typed-cache auto is the model's own cache");
  expect_clean_error(run_command(base + test::make_temp_dir("kvc-sweep-typed-bad") + " --typed-cache-press snapkv"),
                     "--typed-cache-press");
  expect_clean_error(
      run_command(base + test::make_temp_dir("kvc-sweep-typed-bad") + " --typed-cache q8_0 --typed-cache-press d2o"),
      "merges evicted entries");
  expect_clean_error(run_command(bin("kvc-eval") + " sweep -m " + kStories + " -t 1 -f " + kText +
                                 " -c 64 --max-windows 1 --methods none --tasks kl --typed-cache q4_0 --out-dir " +
                                 test::make_temp_dir("kvc-sweep-typed-bad")),
                     "head_dim is 8");
}

TEST(EvalNeedle, WritesGridJsonTablesAndHeatmap) {
  const std::string out = test::make_temp_dir("kvc-needle-cli");
  const auto r =
      run_command(bin("kvc-eval") + " needle -m " + kStories + " -t 1 --haystack " + kText +
                  " --lengths 96,160 --depths 0,0.5,1 --samples 1 --templates passkey --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["accuracy_grid"].size(), 3u);
  EXPECT_EQ(j["cells"].size(), 6u);
  EXPECT_GE(j["accuracy"].get<double>(), 0.0);
  EXPECT_LE(j["accuracy"].get<double>(), 1.0);
  EXPECT_TRUE(j["metadata"].contains("data_hash"));
  EXPECT_EQ(nlohmann::json::parse(test::slurp(out + "/needle_grid.json"))["cells"].size(), 6u);
  EXPECT_EQ(read_jsonl(out + "/cells.jsonl").size(), 6u);
  EXPECT_NE(test::slurp(out + "/needle_grid.csv").find("depth \\ length,96,160"), std::string::npos);
  if (std::system("command -v gnuplot >/dev/null") == 0)
    EXPECT_EQ(test::slurp(out + "/needle_heatmap.png").substr(1, 3), "PNG");
  // Run again: every cell is read back from cells.jsonl, sample for sample, and none is appended.
  const auto again =
      run_command(bin("kvc-eval") + " needle -m " + kStories + " -t 1 --haystack " + kText +
                  " --lengths 96,160 --depths 0,0.5,1 --samples 1 --templates passkey --out " + out + " --json");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(nlohmann::json::parse(again.out)["cells"], j["cells"]);
  EXPECT_EQ(read_jsonl(out + "/cells.jsonl").size(), 6u);
}

TEST(EvalBadInput, SweepPrefillModeChunkAndForeignSampleCheckpoints) {
  const std::string out = test::make_temp_dir("kvc-sweep-bad");
  expect_clean_error(run_command(sweep_cmd(out, "--prefill sometimes")), "--prefill: unknown mode 'sometimes'");
  expect_clean_error(run_command(bin("kvc-eval") + " sweep -m " + kStories + " --tasks needle --haystack " + kText +
                                 " --chunk 0 --out " + out),
                     "--chunk must be >= 1, got 0");
  // Finished samples made under other settings are never mixed into a cell.
  {
    std::ofstream(out + "/samples.jsonl") << R"({"sample":"needle|none|0|0","settings":"other","record":{}})"
                                          << "\n";
  }
  expect_clean_error(run_command(sweep_cmd(out)), "other settings");
}

// A checkpointed kl window that is not one (a hand-edited or foreign line) stops the sweep in one line
// naming the window, instead of an exception from the JSON library or a silently wrong cell.
TEST(EvalBadInput, SweepKlCheckpointWithoutScoresIsOneLine) {
  const std::string out = test::make_temp_dir("kvc-sweep-kl-bad");
  const std::string cmd = bin("kvc-eval") + " sweep -m " + kStories +
                          " -t 1 --methods snapkv --ratios 0.5 --tasks kl " + "--file " + kText +
                          " --window 64 --max-windows 2 --out-dir " + out + " --json";
  ASSERT_EQ(run_command(cmd).exit_code, 0);
  std::vector<nlohmann::json> lines = read_jsonl(out + "/samples.jsonl");
  ASSERT_FALSE(lines.empty());
  lines[0]["record"].erase("kl_sum");
  {
    std::ofstream rewrite(out + "/samples.jsonl");
    for (const auto& line : lines) rewrite << line.dump() << "\n";
  }
  std::filesystem::remove(out + "/results.jsonl");  // the cells run again, from the checkpoint
  expect_clean_error(run_command(cmd), "has no number 'kl_sum'");
}

// A retrieval cache picks entries per new token; a kl schedule of several tokens a pass would score it
// at KL 0. Both commands refuse it in one line, before any window runs.
TEST(EvalBadInput, RetrievalWithSeveralTokensPerKlPassIsOneLine) {
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kStories + " -t 1 -f " + kText +
                                 " -c 64 --max-windows 1 --chunk 4 --retrieval adaptive:budget=16"),
                     "with --chunk 4: a retrieval cache picks entries for one new token at a time");
  const std::string out = test::make_temp_dir("kvc-sweep-kl-retrieval");
  expect_clean_error(
      run_command(bin("kvc-eval") + " sweep -m " + kStories + " -t 1 --methods none --tasks kl --file " + kText +
                  " --window 64 --max-windows 1 --chunk 4 --retrieval adaptive:budget=16 " + "--out-dir " + out),
      "use --chunk 1");
  EXPECT_TRUE(!std::filesystem::exists(out + "/samples.jsonl") || read_jsonl(out + "/samples.jsonl").empty());
}

// kl windows checkpointed before the RAM a cache holds was recorded come from caches in RAM: read back,
// their RAM is their payload.
TEST(EvalSweep, KlCheckpointsWithoutRamBytesReadBackAsTheirPayload) {
  const std::string out = test::make_temp_dir("kvc-sweep-kl-old");
  const std::string cmd = bin("kvc-eval") + " sweep -m " + kStories +
                          " -t 1 --methods snapkv --ratios 0.5 --tasks kl " + "--file " + kText +
                          " --window 64 --max-windows 2 --out-dir " + out + " --json";
  ASSERT_EQ(run_command(cmd).exit_code, 0);
  std::vector<nlohmann::json> lines = read_jsonl(out + "/samples.jsonl");
  ASSERT_FALSE(lines.empty());
  {
    std::ofstream rewrite(out + "/samples.jsonl");
    for (auto& line : lines) {
      line["record"].erase("compressed_ram_bytes");
      rewrite << line.dump() << "\n";
    }
  }
  std::filesystem::remove(out + "/results.jsonl");
  ASSERT_EQ(run_command(cmd).exit_code, 0);
  for (const auto& rec : read_jsonl(out + "/results.jsonl"))
    EXPECT_EQ(rec["result"]["ram_ratio"], rec["result"]["compression_ratio"]) << rec["method"];
}

TEST(EvalBadInput, UnknownTaskNames) {
  expect_clean_error(run_command(bin("kvc-eval") + " sweep -m " + kStories + " --tasks kl,nedle --out /tmp/x"),
                     "unknown task 'nedle'");
  expect_clean_error(run_command(bin("kvc-eval") + " tasks -m " + kStories + " --tasks niah_singel"),
                     "unknown task 'niah_singel'");
  expect_clean_error(run_command(bin("kvc-eval") + " sweep -m " + kStories + " --methods bogus --out /tmp/x"),
                     "unknown method 'bogus'");
  expect_clean_error(run_command(bin("kvc-eval") + " longbench -m " + kStories + " --dataset nope --data /dev/null"),
                     "nope");
}

// RULER's max_seq_length counts the prompt and the tokens the task generates (niah: 128).
TEST(EvalRuler, LengthsCountTheGeneratedTokens) {
  const auto r = run_command(bin("kvc-eval") + " tasks -m " + kStories +
                             " -t 1 --tasks niah_single_1 --lengths 512 --samples 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto sample = nlohmann::json::parse(r.out)["results"][0]["samples"][0];
  EXPECT_LE(sample["prompt_tokens"].get<int64_t>(), 512 - 128);
  EXPECT_GT(sample["prompt_tokens"].get<int64_t>(), 512 - 128 - 64);  // filled up to a haystack sentence
  expect_clean_error(
      run_command(bin("kvc-eval") + " tasks -m " + kStories + " --tasks niah_single_1 --lengths 513 --json"),
      "--lengths: 513 exceeds the model's context of 512");
  expect_clean_error(
      run_command(bin("kvc-eval") + " tasks -m " + kStories + " --tasks niah_single_1 --lengths 130 --json"),
      "leaves no room for a prompt besides the 128 tokens");
}

std::string longbench_file(const std::string& dir, int context_words) {
  std::string ctx;
  for (int i = 0; i < context_words; ++i) ctx += "Tom has a red ball. ";
  const std::string path = dir + "/qa.jsonl";
  const nlohmann::json good = {
      {"context", ctx}, {"input", "What does Tom have?"}, {"answers", {"a red ball"}}, {"_id", "s1"}};
  test::write_bytes(path, good.dump() + "\n{\"context\": \"x\", \"input\": \n" + good.dump() + "\n");
  return path;
}

TEST(EvalBadInput, MalformedJsonlLinesSkipOrStopByFlag) {
  const std::string path = longbench_file(test::make_temp_dir("kvc-lb"), 10);
  const std::string base = bin("kvc-eval") + " longbench -m " + kStories + " -t 1 --dataset hotpotqa --data " + path +
                           " --max-new-tokens 4 --json";
  expect_clean_error(run_command(base + " --on-bad-line stop"), path + ":2");
  const auto r = run_command(base + " --on-bad-line skip");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find(path + ":2"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples_scored"], 2);
  EXPECT_EQ(j["skipped_lines"], 1);
  EXPECT_TRUE(j["metadata"].contains("data_hash"));
}

TEST(EvalBadInput, OverLongContextRefusedOrTruncatedByFlag) {
  const std::string path = longbench_file(test::make_temp_dir("kvc-lb-long"), 200);  // ~1000+ tokens > 512
  const std::string base = bin("kvc-eval") + " longbench -m " + kStories + " -t 1 --dataset hotpotqa --data " + path +
                           " --on-bad-line skip --max-new-tokens 4 --json";
  expect_clean_error(run_command(base + " --truncate refuse"), "--truncate middle");
  const auto r = run_command(base + " --truncate middle");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("cut from the middle"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["truncated_samples"], 2);
  EXPECT_LE(j["samples"][0]["prompt_tokens"].get<int>() + 4, 512);
}

TEST(EvalLongBench, TakesTheDataSetFromTheFileAndRefusesAnotherSetsFile) {
  const std::string dir = test::make_temp_dir("kvc-lb-detect");
  std::string ctx;
  for (int i = 0; i < 20; ++i) ctx += "Tom has a red ball. ";
  const nlohmann::json line = {{"context", ctx},
                               {"input", "What does Tom have?"},
                               {"answers", {"a red ball"}},
                               {"dataset", "hotpotqa"},
                               {"language", "en"},
                               {"length", 120},
                               {"_id", "s1"}};
  test::write_bytes(dir + "/some_file.jsonl", line.dump() + "\n");
  const std::string run = bin("kvc-eval") + " longbench -m " + kStories + " -t 1 -f " + dir +
                          "/some_file.jsonl --max-new-tokens 4 --length-buckets --json --out-dir " + dir + "/out";
  const auto r = run_command(run);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["dataset"], "hotpotqa");
  EXPECT_EQ(j["length_buckets"]["0-4k"]["samples"], 1);
  // The predictions file is LongBench's pred format, and longbench-score gives the same score.
  const auto rescored = run_command(bin("kvc-eval") + " longbench-score -f " + dir + "/out/hotpotqa.jsonl --json");
  ASSERT_EQ(rescored.exit_code, 0) << rescored.err;
  EXPECT_EQ(nlohmann::json::parse(rescored.out)["longbench_score"], j["longbench_score"]);
  expect_clean_error(
      run_command(bin("kvc-eval") + " longbench -m " + kStories + " -f " + dir + "/some_file.jsonl --dataset trec"),
      "belongs to data set 'hotpotqa', not 'trec'");
}

TEST(EvalLongBench, MaxLengthCutsTheMiddleOfThePrompt) {
  const std::string path = longbench_file(test::make_temp_dir("kvc-lb-maxlen"), 40);
  const auto r = run_command(bin("kvc-eval") + " longbench -m " + kStories + " -t 1 --dataset hotpotqa -f " + path +
                             " --max-new-tokens 4 --max-length 101 --truncate middle --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["samples"][0]["prompt_tokens"], 100);  // LongBench keeps 2 x int(101 / 2)
  expect_clean_error(run_command(bin("kvc-eval") + " longbench -m " + kStories + " --dataset hotpotqa -f " + path +
                                 " --max-length 600"),
                     "--max-length 600");
}

// The committed prediction files were scored by LongBench's eval.py (scripts/make_longbench_eval_goldens.py).
TEST(EvalLongBench, ScoreCommandGivesEvalPysNumbers) {
  const std::string dir = std::string(KVC_SOURCE_DIR) + "/data/reference/longbench_eval";
  const auto golden = nlohmann::json::parse(read_text_file(dir + "/scores.json"));
  for (const std::string name : {"trec", "lcc", "multifieldqa_zh"}) {
    const auto r = run_command(bin("kvc-eval") + " longbench-score -f " + dir + "/pred/" + name +
                               ".jsonl --length-buckets --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["longbench_score"], golden["scores"][name]["score"]) << name;
    EXPECT_EQ(j["length_buckets"]["8k+"]["longbench_score"], golden["scores"][name]["score_e"]["8k+"]) << name;
  }
  expect_clean_error(run_command(bin("kvc-eval") + " longbench-score -f /dev/null"), "pass --dataset");
}

}  // namespace
}  // namespace kvc
