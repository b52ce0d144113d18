// One flag vocabulary across the tools and no silent no-ops: the standard names and their old
// spellings, unknown options reported with the nearest valid one, conflicting or ineffective flags
// refused in one line; the sampler's filters against brute-force computations; and the smaller
// command-line fixes (generate's output lines, -m diagnostics, tasks that keep finished results,
// kvc-cluster's store paths and temporary folders, the sweep plot's styles).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "generation/sampler.h"
#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

using test::bin;
using test::expect_clean_error;
using test::run_command;

const std::string kStories = test::model_dir("stories260K");
const std::string kText = test::data_file("tinystories/tinystories_excerpt_30k.txt");

std::string generate(const std::string& args) { return bin("kvc-generate") + " -m " + kStories + " -t 1 " + args; }
std::string eval_ppl(const std::string& args) { return bin("kvc-eval") + " ppl -m " + kStories + " -t 1 " + args; }

// ---------------------------------------------------------------------------------------------
// Sampler filters, each against a brute-force reading of its definition.

std::vector<double> softmax(const std::vector<double>& logits) {
  double max = *std::max_element(logits.begin(), logits.end()), sum = 0;
  std::vector<double> p;
  for (double l : logits) sum += std::exp(l - max);
  for (double l : logits) p.push_back(std::exp(l - max) / sum);
  return p;
}

// Rank = how many tokens come before this one (more probable, or as probable with a lower id).
int64_t rank_of(const std::vector<double>& p, int64_t i) {
  int64_t r = 0;
  for (int64_t j = 0; j < static_cast<int64_t>(p.size()); ++j) r += p[j] > p[i] || (p[j] == p[i] && j < i);
  return r;
}

std::set<int64_t> brute_force_candidates(const std::vector<double>& p, int64_t top_k, double top_p, double min_p) {
  std::set<int64_t> after_k;
  for (int64_t i = 0; i < static_cast<int64_t>(p.size()); ++i)
    if (top_k == 0 || rank_of(p, i) < top_k) after_k.insert(i);
  double total = 0;
  for (int64_t i : after_k) total += p[i];
  std::set<int64_t> after_p;  // kept iff the tokens ranked before it have not yet reached top_p of the mass
  for (int64_t i : after_k) {
    double before = 0;
    for (int64_t j : after_k) before += rank_of(p, j) < rank_of(p, i) ? p[j] : 0;
    if (before < top_p * total) after_p.insert(i);
  }
  double top = 0;
  for (int64_t i : after_p) top = std::max(top, p[i]);
  std::set<int64_t> after_min_p;
  for (int64_t i : after_p)
    if (p[i] >= min_p * top) after_min_p.insert(i);
  return after_min_p;
}

TEST(Sampler, RepeatPenaltyDividesPositiveAndMultipliesNegativeLogitsOnce) {
  const std::vector<double> logits{2.0, -1.0, 0.5, -3.0, 1.0, 0.0};
  const std::vector<int> recent{0, 1, 1, 4, 5};  // token 1 twice: penalised once, as llama.cpp
  const std::vector<double> got = apply_repeat_penalty(logits, recent, 2.0);
  std::vector<double> want = logits;
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::find(recent.begin(), recent.end(), static_cast<int>(i)) == recent.end()) continue;
    want[i] = want[i] > 0 ? want[i] / 2.0 : want[i] * 2.0;
  }
  EXPECT_EQ(got, want);
}

TEST(Sampler, TopKTopPMinPMatchBruteForce) {
  const std::vector<double> p = softmax({1.2, 3.0, 0.1, 2.5, 2.5, -1.0, 0.7, 1.9});
  for (int64_t k : {0, 1, 2, 3, 5, 8, 20})
    for (double top_p : {0.1, 0.5, 0.8, 0.95, 1.0})
      for (double min_p : {0.0, 0.05, 0.2, 0.5, 1.0}) {
        SCOPED_TRACE(testing::Message() << "top_k " << k << " top_p " << top_p << " min_p " << min_p);
        const std::vector<int64_t> got = filter_candidates(p, k, top_p, min_p);
        EXPECT_EQ(std::set<int64_t>(got.begin(), got.end()), brute_force_candidates(p, k, top_p, min_p));
        EXPECT_TRUE(std::is_sorted(got.begin(), got.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; }));
      }
}

TEST(Sampler, DrawsFollowTheFilteredDistribution) {
  const std::vector<double> logits{0.0, 2.0, 1.0, 1.5, -1.0};
  SamplingParams params;
  params.temperature = 1.0;
  params.top_k = 3;
  params.seed = 11;
  Sampler sampler(params);
  const at::Tensor t = at::tensor(std::vector<float>(logits.begin(), logits.end()));
  const int draws = 20000;
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i) counts[sampler.sample(t)]++;
  const std::vector<double> p = softmax(logits);
  const double kept = p[1] + p[2] + p[3];
  for (int id : {1, 2, 3}) EXPECT_NEAR(counts[id] / double(draws), p[id] / kept, 0.015) << id;
  EXPECT_EQ(counts[0] + counts[4], 0) << "top-k 3 never draws the two least probable tokens";
}

TEST(Sampler, GreedyHonoursTheRepeatPenaltyOverTheLastNTokens) {
  const at::Tensor logits = at::tensor(std::vector<float>{1.0f, 3.0f, 2.0f});
  SamplingParams params;
  params.repeat_penalty = 2.0;  // token 1: 3 -> 1.5, below token 2
  params.repeat_last_n = 2;
  params.penalty_context = {1, 0};
  EXPECT_EQ(Sampler(params).sample(logits), 2);
  params.penalty_context = {1, 0, 0};  // token 1 is now 3 tokens back, outside the window
  EXPECT_EQ(Sampler(params).sample(logits), 1);
  params.repeat_last_n = 0;
  params.penalty_context = {1};
  EXPECT_EQ(Sampler(params).sample(logits), 1);
}

// ---------------------------------------------------------------------------------------------
// Unknown options.

TEST(FlagVocabulary, UnknownOptionIsNamedWithTheNearestValidOne) {
  const auto r = run_command(eval_ppl("-f " + kText + " --windw 128"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "kvc-eval: error: unknown option '--windw'; did you mean '--ctx-size' (formerly --window)?\n");
  // The first unknown option in the order given, not CLI11's reversed list of extras.
  const auto two = run_command(eval_ppl("-f " + kText + " --ctx-sise 64 --max-windws 1"));
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_EQ(two.err, "kvc-eval: error: unknown option '--ctx-sise'; did you mean '--ctx-size'?\n");
  const auto temp = run_command(generate("-p hi --tmp 0.5"));
  EXPECT_EQ(temp.exit_code, 2);
  EXPECT_EQ(temp.err, "kvc-generate: error: unknown option '--tmp'; did you mean '--temp'?\n");
  const auto far = run_command(generate("-p hi --completely-different"));
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err, "kvc-generate: error: unknown option '--completely-different' (see --help)\n");
  // Negative numbers are values, not unknown options.
  const auto value = run_command(generate("-p hi --repeat-last-n -1 --sed 3"));
  EXPECT_EQ(value.err, "kvc-generate: error: unknown option '--sed'; did you mean '--seed'?\n");
}

// llama-cli's flags, as a user who knows llama.cpp types them: each either works with llama.cpp's
// meaning or is refused by its own name, never read as a bundle of short options ("-ngl 99" as -n "gl").
TEST(FlagVocabulary, LlamaCppFlagsWorkOrAreRefusedByName) {
  // (-t is generate()'s own; q8_0 blocks of 32 do not fit stories260K's head_dim of 8.)
  const std::vector<std::string> supported = {"-c 64",
                                              "-s 3",
                                              "--temp 0",
                                              "--top-k 40",
                                              "--top-p 0.9",
                                              "--min-p 0.05",
                                              "--repeat-penalty 1.1",
                                              "--repeat-last-n 64",
                                              "-ctk f16",
                                              "-ctv bf16"};
  for (const std::string& flag : supported) {
    const auto r = run_command(generate("-p hi -n 2 " + flag));
    EXPECT_EQ(r.exit_code, 0) << flag << ": " << r.err;
  }
  const std::vector<std::pair<std::string, std::string>> refused = {{"-ngl", "99"},
                                                                    {"--n-gpu-layers", "99"},
                                                                    {"-fa", ""},
                                                                    {"--flash-attn", ""},
                                                                    {"-b", "512"},
                                                                    {"-ub", "512"},
                                                                    {"-tb", "2"},
                                                                    {"-np", "4"},
                                                                    {"-cb", ""},
                                                                    {"-md", "d.gguf"},
                                                                    {"-hf", "org/repo"},
                                                                    {"-i", ""},
                                                                    {"-ins", ""},
                                                                    {"-no-cnv", ""},
                                                                    {"-r", "User:"},
                                                                    {"-nkvo", ""},
                                                                    {"--mlock", ""},
                                                                    {"--no-mmap", ""},
                                                                    {"-gan", "4"},
                                                                    {"-ot", "x=CPU"},
                                                                    {"--grammar", "g"},
                                                                    {"-j", "{}"},
                                                                    {"-co", ""},
                                                                    {"-sp", ""},
                                                                    {"--lora", "a.gguf"},
                                                                    {"--mirostat", "2"},
                                                                    {"--rope-freq-base", "1e4"}};
  for (const auto& [flag, value] : refused) {
    const auto r = run_command(generate("-p hi " + flag + " " + value));
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find("llama.cpp flag '" + flag + "' is not supported by kvc: "), std::string::npos)
        << flag << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << flag << ": " << r.err;
  }
  // Every tool, not only kvc-generate; and a tool's own option of the same name is its own.
  const auto eval = run_command(eval_ppl("-f " + kText + " -ngl 99"));
  EXPECT_EQ(eval.exit_code, 2);
  EXPECT_NE(eval.err.find("llama.cpp flag '-ngl' is not supported by kvc"), std::string::npos) << eval.err;
  // -n -1 is llama.cpp's "no limit": here until the context of -c is full, which is the stop reason given.
  const auto unlimited = run_command(generate("-p hi -n -1 -c 32 --ignore-eos --json"));
  ASSERT_EQ(unlimited.exit_code, 0) << unlimited.err;
  const auto stats = nlohmann::json::parse(unlimited.out);
  EXPECT_EQ(stats["prompt_tokens"].get<int64_t>() + stats["generated_tokens"].get<int64_t>(), 32);
  EXPECT_EQ(stats["stop_reason"], "context");
  EXPECT_EQ(run_command(generate("-p hi -n -2")).exit_code, 2);
  // -e reads -p's backslash sequences as llama.cpp does: the same ids as the text with a real newline.
  const auto escaped = run_command(generate("-e -p 'Once\\nupon\\x20a' -n 1 --json"));
  const auto typed = run_command(generate("-p \"$(printf 'Once\\nupon a')\" -n 1 --json"));
  const auto literal = run_command(generate("-p 'Once\\nupon\\x20a' -n 1 --json"));
  ASSERT_EQ(escaped.exit_code, 0) << escaped.err;
  ASSERT_EQ(typed.exit_code, 0) << typed.err;
  EXPECT_EQ(nlohmann::json::parse(escaped.out)["prompt_ids"], nlohmann::json::parse(typed.out)["prompt_ids"]);
  EXPECT_NE(nlohmann::json::parse(literal.out)["prompt_ids"], nlohmann::json::parse(typed.out)["prompt_ids"]);
  // A short option with its value attached is still read as one ("-c64", "-pHello").
  const auto attached = run_command(generate("-pHello -n2 -c64"));
  EXPECT_EQ(attached.exit_code, 0) << attached.err;
}

TEST(FlagVocabulary, JsonIsASwitchAndJsonOutNamesTheFile) {
  const auto r = run_command(bin("kvc-bench") + " -m " + kStories + " --contexts 64 --json bench.json");
  expect_clean_error(r, "--json-out bench.json");
  EXPECT_EQ(r.exit_code, 2);
}

// ---------------------------------------------------------------------------------------------
// Standard names and old spellings give the same results.

TEST(FlagVocabulary, AFileFlagReadsStandardInputFromDash) {
  const auto from_file = run_command(eval_ppl("-f " + kText + " -c 64 --max-windows 2 --json"));
  const auto from_stdin = run_command("(cat " + kText + " | " + eval_ppl("-f - -c 64 --max-windows 2 --json") + ")");
  ASSERT_EQ(from_file.exit_code, 0) << from_file.err;
  ASSERT_EQ(from_stdin.exit_code, 0) << from_stdin.err;
  EXPECT_EQ(nlohmann::json::parse(from_file.out)["ppl"], nlohmann::json::parse(from_stdin.out)["ppl"]);
  EXPECT_EQ(nlohmann::json::parse(from_stdin.out)["tokens_in_file"],
            nlohmann::json::parse(from_file.out)["tokens_in_file"]);
}

TEST(FlagVocabulary, EvalStandardNamesAndOldSpellingsAgree) {
  const auto standard = run_command(eval_ppl("-f " + kText + " -c 64 --max-windows 2 --json"));
  const auto old = run_command(eval_ppl("--file " + kText + " --window 64 --max-windows 2 --json"));
  const auto long_names = run_command(eval_ppl("--file=" + kText + " --ctx-size=64 --max-windows 2 --json"));
  ASSERT_EQ(standard.exit_code, 0) << standard.err;
  ASSERT_EQ(old.exit_code, 0) << old.err;
  ASSERT_EQ(long_names.exit_code, 0) << long_names.err;
  const double ppl = nlohmann::json::parse(standard.out)["ppl"];
  EXPECT_EQ(nlohmann::json::parse(standard.out)["window"], 64);
  EXPECT_EQ(nlohmann::json::parse(old.out)["ppl"].get<double>(), ppl);
  EXPECT_EQ(nlohmann::json::parse(long_names.out)["ppl"].get<double>(), ppl);
  // Help shows the standard names only.
  const auto help = run_command(bin("kvc-eval") + " ppl --help");
  EXPECT_NE(help.out.find("--ctx-size"), std::string::npos);
  EXPECT_EQ(help.out.find("--window"), std::string::npos) << help.out;
}

TEST(FlagVocabulary, GenerateFileJsonAndJsonOut) {
  const std::string dir = test::make_temp_dir("kvc-vocab-generate");
  test::write_bytes(dir + "/prompt.txt", "Once upon a time");
  const auto standard = run_command(generate("-f " + dir + "/prompt.txt -n 6 --json-out " + dir + "/a.json"));
  ASSERT_EQ(standard.exit_code, 0) << standard.err;
  const auto old = run_command(generate("--prompt-file " + dir + "/prompt.txt -n 6 --stats-json " + dir + "/b.json"));
  ASSERT_EQ(old.exit_code, 0) << old.err;
  const auto a = nlohmann::json::parse(test::slurp(dir + "/a.json"));
  EXPECT_EQ(a["generated_ids"], nlohmann::json::parse(test::slurp(dir + "/b.json"))["generated_ids"]);
  // --json: one JSON object on stdout and nothing else there.
  const auto json = run_command(generate("-f " + dir + "/prompt.txt -n 6 --json"));
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["generated_ids"], a["generated_ids"]);
  EXPECT_EQ(j["text"].get<std::string>().empty(), false);
  EXPECT_EQ(json.out.find('\n'), json.out.size() - 1);
}

TEST(FlagVocabulary, LlamaCppSamplingAliases) {
  const std::string args =
      "-p 'Once upon a time' -n 12 --temp 0.9 -s 5 --top-k 20 --top-p 0.9 --min-p 0.05 "
      "--repeat-penalty 1.3 --repeat-last-n 16 --json";
  const auto a = run_command(generate(args)), b = run_command(generate(args));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const auto ja = nlohmann::json::parse(a.out);
  EXPECT_EQ(ja["generated_ids"], nlohmann::json::parse(b.out)["generated_ids"]) << "seeded runs repeat";
  EXPECT_EQ(ja["top_k"], 20);
  EXPECT_EQ(ja["min_p"], 0.05);
  EXPECT_EQ(ja["repeat_penalty"], 1.3);
  EXPECT_EQ(ja["repeat_last_n"], 16);
  EXPECT_EQ(ja["seed"], 5);
  EXPECT_EQ(ja["temperature"], 0.9);
  const auto long_seed =
      run_command(generate("-p 'Once upon a time' -n 12 --temperature 0.9 --seed 5 --top-k 20 "
                           "--top-p 0.9 --min-p 0.05 --repeat-penalty 1.3 --repeat-last-n 16 --json"));
  EXPECT_EQ(nlohmann::json::parse(long_seed.out)["generated_ids"], ja["generated_ids"]);
  expect_clean_error(run_command(generate("-p hi --top-k -1")), "--top-k");
  expect_clean_error(run_command(generate("-p hi --min-p 1.5")), "--min-p");
  expect_clean_error(run_command(generate("-p hi --repeat-penalty 0")), "--repeat-penalty");
}

TEST(FlagVocabulary, CtxSizeLimitsPromptPlusGeneratedTokens) {
  const auto r = run_command(generate("-p 'Once upon a time' -c 12 -n 100 --ignore-eos --json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["prompt_tokens"].get<int64_t>() + j["generated_tokens"].get<int64_t>(), 12);
  EXPECT_EQ(j["stop_reason"], "context");  // -c ended the run, not -n
  expect_clean_error(run_command(generate("-p hi -c 4096 -n 2")), "above the model's context of 512");
  const auto bounded = run_command(generate("-p hi -c 4096 -n 2 --press h2o --budget 32 -q"));
  EXPECT_EQ(bounded.exit_code, 0) << bounded.err;
  expect_clean_error(run_command(generate("-p 'Once upon a time there was' -c 3 -n 2")), "the prompt alone has");
}

TEST(FlagVocabulary, ProfileCalibrateTrainAndInspectTakeTheStandardNames) {
  const std::string dir = test::make_temp_dir("kvc-vocab-tools");
  const auto profile = run_command(bin("kvc-profile") + " -m " + kStories + " -t 1 -f " + kText +
                                   " -c 64 --windows 1 --ratios 0.5 --no-plot --json --out-dir " + dir + "/prof");
  ASSERT_EQ(profile.exit_code, 0) << profile.err;
  EXPECT_EQ(nlohmann::json::parse(profile.out)["context"], 64);
  EXPECT_TRUE(std::filesystem::exists(dir + "/prof/profile.safetensors"));
  const auto calibrate = run_command(bin("kvc-calibrate") + " -m " + kStories + " -t 1 -f " + kText +
                                     " --tokens 2000 -c 64 --json -o " + dir + "/bases.safetensors");
  ASSERT_EQ(calibrate.exit_code, 0) << calibrate.err;
  const auto train = run_command(
      bin("kvc-train") + " -m " + kStories + " -t 1 --bases " + dir + "/bases.safetensors -f " + kText +
      " --steps 2 -c 32 --batch 1 --eval-every 100 --eval-windows 1 --json -o " + dir + "/gates.safetensors");
  ASSERT_EQ(train.exit_code, 0) << train.err;
  EXPECT_TRUE(std::filesystem::exists(dir + "/gates.safetensors"));
  test::write_bytes(dir + "/text.txt", "Once upon a time");
  const auto inspect = run_command(bin("kvc-train") + " inspect -m " + kStories + " -t 1 --lowrank " + dir +
                                   "/gates.safetensors -f " + dir + "/text.txt --json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  EXPECT_GT(nlohmann::json::parse(inspect.out)["tokens"].size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// No silent no-ops.

TEST(NoSilentNoOps, CompressionFlagsThatWouldDoNothingOrConflict) {
  const std::string base = "-p hi -n 2 -q ";
  expect_clean_error(run_command(generate(base + "--press snapkv")), "add --ratio");
  expect_clean_error(run_command(generate(base + "--budgets p.safetensors")), "add --press");
  expect_clean_error(run_command(generate(base + "--press snapkv --ratio 0.5 --budget 50")), "conflict");
  expect_clean_error(run_command(generate(base + "--press snapkv:window=2,window=3 --ratio 0.5")),
                     "key 'window' is given twice");
  expect_clean_error(run_command(generate(base + "--press 'h2o:' --budget 32")), "empty parameter list");
  expect_clean_error(run_command(generate(base + "--press snapkv:windw=3 --ratio 0.5")), "unknown parameter 'windw'");
  expect_clean_error(run_command(generate(base + "--rank 4")), "--rank needs --lowrank");
  expect_clean_error(run_command(generate(base + "--lowrank 'g.safetensors:tau=0.1,tau=0.2'")), "'tau' is given twice");
  expect_clean_error(run_command(generate(base + "--lowrank 'g.safetensors:'")), "empty parameter list");
  expect_clean_error(run_command(generate(base + "--retrieval-store s.kvs")), "needs --retrieval");
  expect_clean_error(run_command(generate(base + "--retrieval 'adaptive:topk=1,topk=2'")), "'topk' is given twice");
  expect_clean_error(run_command(generate(base + "--retrieval 'adaptive:'")), "empty parameter list");
  expect_clean_error(run_command(bin("kvc-cluster") + " replay -m " + kStories +
                                 " -p 'Once upon a time' -n 2 "
                                 "-s 'static:csize=4,csize=8'"),
                     "'csize' is given twice");
  // kvc-eval shares the checks.
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kStories + " -f " + kText + " --press snapkv"),
                     "add --ratio");
}

TEST(NoSilentNoOps, SamplingFiltersAtTemperatureZeroWarn) {
  const auto r = run_command(generate("-p hi -n 2 -q --top-k 5 --min-p 0.1"));
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("kvc-generate: warning: --top-k, --min-p ignored at --temp 0 (greedy)"), std::string::npos)
      << r.err;
  const auto sampled = run_command(generate("-p hi -n 2 -q --top-k 5 --temp 0.7"));
  EXPECT_EQ(sampled.err.find("warning"), std::string::npos) << sampled.err;
}

// ---------------------------------------------------------------------------------------------
// Smaller items.

TEST(SmallerItems, GeneratedTextEndsItsLineBeforeTheSummary) {
  const std::string dir = test::make_temp_dir("kvc-vocab-lines");
  // stdout and stderr into one pipe, as on a terminal.
  const auto r = run_command("(" + generate("-p 'Once upon a time' -n 8 --json-out " + dir + "/s.json") + " 2>&1)");
  ASSERT_EQ(r.exit_code, 0);
  const size_t summary = r.out.find("kvc-generate: ");
  ASSERT_NE(summary, std::string::npos) << r.out;
  EXPECT_GT(summary, 0u);
  EXPECT_EQ(r.out[summary - 1], '\n') << r.out;
  const auto s = nlohmann::json::parse(test::slurp(dir + "/s.json"));
  // The summary says which KV size it prints, in the JSON's own numbers.
  char expected[128];
  std::snprintf(expected, sizeof expected, "KV cache %.1f KiB resident at the end (after prefill: %.1f KiB",
                s["kv_resident_bytes"].get<double>() / 1024.0,
                s["kv_after_prefill_resident_bytes"].get<double>() / 1024.0);
  EXPECT_NE(r.out.find(expected), std::string::npos) << r.out;
}

TEST(SmallerItems, ModelPathDiagnostics) {
  const auto file_in_folder = run_command(bin("kvc-generate") + " -m " + kStories + "/model.safetensors -p hi -n 2 -q");
  EXPECT_EQ(file_in_folder.exit_code, 0) << file_in_folder.err;
  const std::string dir = test::make_temp_dir("kvc-vocab-model");
  test::write_bytes(dir + "/model.gguf", "GGUF");
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + dir + "/model.gguf -p hi"), "truncated");
  expect_clean_error(run_command(bin("kvc-generate") + " -m meta-llama/Llama-2-7b -p hi"), "Hugging Face id");
  std::filesystem::create_directories(dir + "/hf");
  test::write_bytes(dir + "/hf/tokenizer.json", "{}");
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + dir + "/hf -p hi"),
                     "tokenizer.json but no config.json");
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + dir + "/hf/tokenizer.json -p hi"),
                     "a file, not a model folder");
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + kText + " -p hi"), "a file, not a model folder");
  expect_clean_error(run_command(bin("kvc-generate") + " -m /nonexistent/model -p hi"), "not found");
}

TEST(SmallerItems, TasksKeepFinishedResultsWhenOneFails) {
  const std::string dir = test::make_temp_dir("kvc-vocab-tasks");
  const auto r = run_command(bin("kvc-eval") + " tasks -m " + kStories +
                             " -t 1 --tasks niah_single,variable_tracking "
                             "--lengths 256 --samples 1 --max-new-tokens 8 --json --out-dir " +
                             dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("kvc-eval: error: tasks: variable_tracking"), std::string::npos) << r.err;
  const auto saved = nlohmann::json::parse(test::slurp(dir + "/tasks.json"));
  ASSERT_EQ(saved["results"].size(), 1u);
  EXPECT_EQ(saved["results"][0]["task"], "niah_single");
  EXPECT_EQ(saved["failed_tasks"], nlohmann::json::array({"variable_tracking"}));
  EXPECT_EQ(nlohmann::json::parse(r.out)["results"].size(), 1u);
}

TEST(SmallerItems, ClusterVerifyReadsTheStoreBesideItsIndex) {
  const std::string dir = test::make_temp_dir("kvc-vocab-cluster");
  std::filesystem::create_directories(dir + "/work/index");
  const auto build = run_command("cd " + dir + "/work && " + bin("kvc-cluster") + " build -m " + kStories +
                                 " -p 'Once upon a time there was a little girl named Lily. She liked to play.' "
                                 "--store s.kvs --index index/s.safetensors");
  ASSERT_EQ(build.exit_code, 0) << build.err;
  // From another working directory, and after moving both files together.
  auto r = run_command("cd / && " + bin("kvc-cluster") + " verify --index " + dir + "/work/index/s.safetensors");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::filesystem::rename(dir + "/work", dir + "/moved");
  r = run_command("cd / && " + bin("kvc-cluster") + " verify --index " + dir + "/moved/index/s.safetensors");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(SmallerItems, ClusterReplayWithoutOutDirLeavesNothingInTmp) {
  const std::string tmp = test::make_temp_dir("kvc-vocab-replay");
  const std::string replay = "TMPDIR=" + tmp + " " + bin("kvc-cluster") + " replay -m " + kStories + " -t 1 ";
  const auto ok = run_command(replay + "-p 'Once upon a time there was a little girl' -n 4 -s adaptive --json");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(std::filesystem::is_empty(tmp));
  const auto failed = run_command(replay + "-p 'Once' --prompt-tokens 1 -n 4 -s adaptive");
  EXPECT_NE(failed.exit_code, 0);
  EXPECT_TRUE(std::filesystem::is_empty(tmp)) << "also removed after an error";
}

TEST(SmallerItems, SweepPlotStylesEveryMethodAndDrawsTheBaselineAcross) {
  const std::string dir = test::make_temp_dir("kvc-vocab-sweep");
  const auto r = run_command(bin("kvc-eval") + " sweep -m " + kStories +
                             " -t 1 --methods none,snapkv,h2o,tova,knorm "
                             "--ratios 0.5,0.9 --tasks kl -f " +
                             kText + " -c 64 --max-windows 1 --json --out-dir " + dir);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string gp = test::slurp(dir + "/score_vs_ratio_kl.gp");
  std::set<std::string> styles;
  std::istringstream lines(gp);
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find("lc rgb");
    if (at != std::string::npos) styles.insert(line.substr(at, line.find(" lw") - at));
  }
  EXPECT_EQ(styles.size(), 5u) << gp;
  // The first data block is the baseline: one score at every ratio.
  std::istringstream dat(test::slurp(dir + "/score_vs_ratio_kl.dat"));
  std::string header, line;
  std::getline(dat, header);
  EXPECT_NE(header.find("none"), std::string::npos) << header;
  std::vector<std::pair<double, double>> points;
  while (std::getline(dat, line) && !line.empty()) {
    double x, y;
    std::istringstream(line) >> x >> y;
    points.push_back({x, y});
  }
  ASSERT_EQ(points.size(), 3u);
  EXPECT_EQ(points.front().first, 0.0);
  EXPECT_EQ(points.back().first, 0.9);
  EXPECT_EQ(points.front().second, points.back().second);
}

TEST(SmallerItems, HelpExamplesUseRepositoryPaths) {
  for (const std::string cmd : {"kvc-generate", "kvc-eval ppl", "kvc-eval kl", "kvc-eval needle", "kvc-eval tasks",
                                "kvc-eval sweep", "kvc-profile", "kvc-calibrate", "kvc-train", "kvc-train inspect",
                                "kvc-cluster", "kvc-bench", "kvc-make-checkpoint"}) {
    const auto r = run_command(bin("") + cmd + " --help");
    ASSERT_EQ(r.exit_code, 0) << cmd;
    const std::string examples = r.out.substr(r.out.find("Examples:"));
    EXPECT_NE(r.out.find("Examples:"), std::string::npos) << cmd;
    EXPECT_EQ(examples.find("/tmp"), std::string::npos) << cmd;
    EXPECT_EQ(examples.find("../shared"), std::string::npos) << cmd;
    EXPECT_EQ(examples.find("--stats-json"), std::string::npos) << cmd;
    for (size_t at = examples.find("--window"); at != std::string::npos; at = examples.find("--window", at + 1))
      EXPECT_EQ(examples[at + 8], 's') << cmd << ": --window is spelt -c/--ctx-size";
  }
}

// -q/--quiet is every tool's way to silence its progress lines (each subcommand of kvc-eval and
// kvc-cluster takes it too); without it a long phase shows one on stderr.
TEST(SmallerItems, QuietSilencesProgressInEveryTool) {
  const std::string ppl = eval_ppl("-f " + kText + " -c 64 --max-windows 2");
  auto r = run_command(ppl);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ppl ["), std::string::npos) << r.err;
  r = run_command(ppl + " -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("ppl ["), std::string::npos) << r.err;
  const std::string out = test::make_temp_dir("kvc-quiet");
  r = run_command(bin("kvc-profile") + " -m " + kStories + " -f " + kText + " -c 64 --windows 1 -t 1 --no-plot -q " +
                  "--out-dir " + out + "/p");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("profile ["), std::string::npos) << r.err;
  for (const std::string cmd :
       {"kvc-eval kl", "kvc-eval needle", "kvc-eval tasks", "kvc-eval sweep", "kvc-eval longbench", "kvc-calibrate",
        "kvc-train", "kvc-cluster build", "kvc-cluster replay", "kvc-bench", "kvc-generate"}) {
    r = run_command(bin("") + cmd + " --help");
    EXPECT_NE(r.out.find("-q,--quiet"), std::string::npos) << cmd;
  }
}

}  // namespace
}  // namespace kvc
