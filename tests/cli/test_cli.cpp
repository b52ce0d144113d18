// The tools as a user runs them: reference reproduction through the command line, and bad input
// that must end in one clear line on stderr and a non-zero exit — never a crash.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "io/safetensors.h"
#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

using test::bin;
using test::run_command;

const std::string kStories = test::model_dir("stories260K");

// A copy of stories260K that a test may damage.
std::string copy_of_stories() {
  const std::string dir = test::make_temp_dir("kvc-model");
  EXPECT_EQ(std::system(("cp " + kStories + "/* " + dir + "/").c_str()), 0);
  return dir;
}

std::string generate_cmd(const std::string& model_dir, const std::string& extra = "-p 'Once upon a time' -n 4") {
  return bin("kvc-generate") + " -m " + model_dir + " " + extra;
}

using test::expect_clean_error;

std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

TEST(CliReference, GreedyGenerationReproducesReferenceIds) {
  auto file = st::SafetensorsFile::open(test::reference_dir("stories260K") + "/reference.safetensors");
  const auto ref = nlohmann::json::parse(test::slurp(test::reference_dir("stories260K") + "/reference.json"));
  const std::string dir = test::make_temp_dir("kvc-greedy");
  test::write_bytes(dir + "/prompt.txt", ref["greedy_prompt_text"].get<std::string>());
  const auto r = run_command(generate_cmd(kStories, "--prompt-file " + dir +
                                                        "/prompt.txt -n 40 --temperature 0 "
                                                        "--ignore-eos --stats-json " +
                                                        dir + "/stats.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto stats = nlohmann::json::parse(test::slurp(dir + "/stats.json"));
  const auto& info = file->info("greedy_continuation_ids");
  std::vector<int> expected;
  for (int64_t i = 0; i < info.numel(); ++i) {
    int64_t v;
    std::memcpy(&v, file->data("greedy_continuation_ids") + 8 * i, 8);
    expected.push_back(static_cast<int>(v));
  }
  EXPECT_EQ(stats["generated_ids"].get<std::vector<int>>(), expected);
  EXPECT_NE(r.out.find(ref["greedy_text"].get<std::string>()), std::string::npos) << r.out;
  EXPECT_GT(stats["kv_resident_bytes"].get<int64_t>(), 0);
  EXPECT_GT(stats["decode_tokens_per_second"].get<double>(), 0);
  // A dense cache's step reads its payload; the weights a step reads, from stories260K's config (hidden 64,
  // 8 heads and 4 KV heads of 8, MLP 172, 5 layers, vocabulary 512, the output layer tied to the
  // embedding, which a step reads whole): per layer two norms, q/k/v, o, gate/up and down.
  EXPECT_EQ(stats["kv_step_read_bytes"], stats["kv_payload_bytes"]);
  const int64_t per_layer = 2 * 64 + (64 + 2 * 32) * 64 + 64 * 64 + 2 * 172 * 64 + 64 * 172;
  EXPECT_EQ(stats["weight_bytes"].get<int64_t>(), 4 * (5 * per_layer + 64 + 512 * 64));
}

TEST(CliReference, EvalPerplexityJsonMatchesReference) {
  const auto ref = nlohmann::json::parse(test::slurp(test::reference_dir("stories260K") + "/reference.json"));
  const auto& wiki = ref["perplexity"]["wiki.test.raw"];
  const auto r = run_command(bin("kvc-eval") + " ppl -t 1 -m " + kStories + " --file " +
                             test::data_file("wikitext2/wiki.test.raw") + " --window 256 --max-windows 40 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["tokens_scored"].get<int64_t>(), wiki["tokens_scored"].get<int64_t>());
  EXPECT_NEAR(out["ppl"].get<double>() / wiki["ppl"].get<double>(), 1.0, 1e-4);
  EXPECT_EQ(out["metadata"]["model_config_hash"].get<std::string>().size(), 16u);
}

TEST(CliReference, KlOfTheUncompressedCacheIsZero) {
  const auto r =
      run_command(bin("kvc-eval") + " kl -t 1 -m " + kStories + " --file " +
                  test::data_file("tinystories/tinystories_excerpt_30k.txt") + " --window 128 --max-windows 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  EXPECT_EQ(out["kl"].get<double>(), 0.0);
  EXPECT_EQ(out["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(out["tokens_scored"].get<int64_t>(), 3 * 64);
  EXPECT_EQ(out["compression_ratio"].get<double>(), 0.0);
}

// Prompts start as llama.cpp starts them for the same text (data/reference/prompt_ids.json, from
// llama-tokenize): SmolLM2's file says add_bos_token = false, Gemma 3's true; kvc-generate's prompt and
// the stream kvc-eval ppl scores both follow the file, and --bos / --no-bos override it.
TEST(PromptIds, ToolsStartAPromptAsLlamaCppDoes) {
  std::ifstream in(test::reference_dir("") + "/prompt_ids.json");
  const nlohmann::json gold = nlohmann::json::parse(in);
  int checked = 0;
  for (const auto& [name, path] : {std::pair<std::string, std::string>{"smollm2-135m", test::smollm2_gguf()},
                                   {"gemma3-270m", test::gemma3_gguf()}}) {
    if (!std::ifstream(path)) continue;
    SCOPED_TRACE(name);
    // Each run loads the model: one text of Gemma 3, two of SmolLM2 (its digits split one by one).
    const size_t texts = name == "gemma3-270m" ? 1 : 2;
    for (size_t i = 0; i < texts; ++i) {
      const nlohmann::json& c = gold["models"][name][i];
      const std::string file = test::make_temp_dir("kvc-prompt-ids") + "/prompt.txt";
      std::ofstream(file) << c["text"].get<std::string>();
      const std::vector<int> expected = c["ids"].get<std::vector<int>>();
      const test::CommandResult g =
          run_command(bin("kvc-generate") + " -m " + path + " -f " + file + " -n 1 -t 1 --json");
      ASSERT_EQ(g.exit_code, 0) << g.err;
      EXPECT_EQ(nlohmann::json::parse(g.out)["prompt_ids"].get<std::vector<int>>(), expected);
      const test::CommandResult p = run_command(bin("kvc-eval") + " ppl -m " + path + " -f " + file +
                                                " -c 4 --max-windows 1 -t 1 --protocol llama.cpp --json");
      ASSERT_EQ(p.exit_code, 0) << p.err;
      const nlohmann::json ppl = nlohmann::json::parse(p.out);
      EXPECT_EQ(ppl["tokens_in_file"].get<size_t>(), expected.size());
      const std::vector<int> first = ppl["first_ids"].get<std::vector<int>>();
      EXPECT_TRUE(std::equal(first.begin(), first.end(), expected.begin()));
      // llama-perplexity puts BOS at each window's start only where the file adds it.
      EXPECT_EQ(ppl["window_bos"].is_null(), name == "smollm2-135m");
      ++checked;
    }
    if (name != "smollm2-135m") continue;
    // --bos and --no-bos override the file.
    const std::string base = bin("kvc-generate") + " -m " + path + " -p Hello -n 1 -t 1 --json ";
    const auto first_id = [&](const std::string& flag) {
      const test::CommandResult r = run_command(base + flag);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      return nlohmann::json::parse(r.out)["prompt_ids"][0].get<int>();
    };
    EXPECT_EQ(first_id("--bos"), 1);  // <|im_start|>, SmolLM2's BOS
    EXPECT_NE(first_id("--no-bos"), 1);
  }
  // stories260K (SentencePiece, tokenizer_config.json: add_bos_token true) starts with BOS, id 1.
  const test::CommandResult g =
      run_command(bin("kvc-generate") + " -m " + kStories + " -p 'Once upon' -n 1 -t 1 --json");
  ASSERT_EQ(g.exit_code, 0) << g.err;
  EXPECT_EQ(nlohmann::json::parse(g.out)["prompt_ids"][0].get<int>(), 1);
  if (checked == 0) GTEST_SKIP() << "neither real GGUF is installed (scripts/setup.sh installs them)";
}

// A long prompt's prefill shows its progress on stderr (once it has run a second), one layer at a time
// up to the model's 30; -q silences it, and stdout carries only the text.
TEST(PrefillProgress, ALongPromptShowsItsLayersAndQuietSilencesIt) {
  const std::string model = test::smollm2_gguf();
  if (!std::ifstream(model)) GTEST_SKIP() << "SmolLM2's GGUF is not installed (scripts/setup.sh installs it)";
  const std::string dir = test::make_temp_dir("kvc-prefill-progress");
  std::ofstream(dir + "/prompt.txt") << test::slurp(test::data_file("wikitext2/wiki.test.raw")).substr(0, 4800);
  const std::string base =
      bin("kvc-generate") + " -m " + model + " -f " + dir + "/prompt.txt -n 1 -t 1 --json-out " + dir + "/stats.json";
  const test::CommandResult shown = run_command(base);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  std::ifstream in(dir + "/stats.json");
  const nlohmann::json stats = nlohmann::json::parse(in);
  const int64_t tokens = stats["prompt_tokens"].get<int64_t>();
  EXPECT_GT(tokens, 1000);
  if (stats["prefill_seconds"].get<double>() < 1.2) GTEST_SKIP() << "the prefill took under a second here";
  EXPECT_NE(shown.err.find("prefill " + std::to_string(tokens) + " tokens ["), std::string::npos) << shown.err;
  EXPECT_NE(shown.err.find("] 30/30 "), std::string::npos) << shown.err;
  EXPECT_EQ(shown.out.find("prefill"), std::string::npos);
  const test::CommandResult quiet = run_command(base + " -q");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("prefill " + std::to_string(tokens) + " tokens"), std::string::npos) << quiet.err;
}

TEST(CliErrors, MissingModelFolder) {
  expect_clean_error(run_command(generate_cmd("/nonexistent/model")), "not found: '/nonexistent/model'");
}

TEST(CliErrors, MissingWeights) {
  const std::string dir = copy_of_stories();
  std::remove((dir + "/model.safetensors").c_str());
  expect_clean_error(run_command(generate_cmd(dir)), "model.safetensors");
}

TEST(CliErrors, TruncatedSafetensors) {
  const std::string dir = copy_of_stories();
  const std::string bytes = test::slurp(dir + "/model.safetensors");
  test::write_bytes(dir + "/model.safetensors", bytes.substr(0, bytes.size() / 2));
  expect_clean_error(run_command(generate_cmd(dir)), "beyond the data section");
}

TEST(CliErrors, HeaderLengthBeyondFile) {
  const std::string dir = copy_of_stories();
  std::string bytes(8, '\0');
  const uint64_t n = 1000000;
  std::memcpy(bytes.data(), &n, 8);
  test::write_bytes(dir + "/model.safetensors", bytes + "{}");
  expect_clean_error(run_command(generate_cmd(dir)), "header length");
}

TEST(CliErrors, OverlappingOffsets) {
  const std::string dir = copy_of_stories();
  test::write_bytes(dir + "/model.safetensors",
                    safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                      std::string(12, '\0')));
  expect_clean_error(run_command(generate_cmd(dir)), "overlap");
}

TEST(CliErrors, OffsetsOutOfRange) {
  const std::string dir = copy_of_stories();
  test::write_bytes(
      dir + "/model.safetensors",
      safetensors_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", std::string(8, '\0')));
  expect_clean_error(run_command(generate_cmd(dir)), "beyond the data section");
}

TEST(CliErrors, DtypeShapeMismatch) {
  const std::string dir = copy_of_stories();
  test::write_bytes(
      dir + "/model.safetensors",
      safetensors_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, '\0')));
  expect_clean_error(run_command(generate_cmd(dir)), "'a'");
}

TEST(CliErrors, TensorShapeDisagreesWithConfig) {
  const std::string dir = copy_of_stories();
  std::string config = test::slurp(dir + "/config.json");
  config.replace(config.find("\"intermediate_size\": 172"), 24, "\"intermediate_size\": 170");
  test::write_bytes(dir + "/config.json", config);
  expect_clean_error(run_command(generate_cmd(dir)), "config.json implies");
}

TEST(CliErrors, ConfigMissingRequiredField) {
  const std::string dir = copy_of_stories();
  auto config = nlohmann::json::parse(test::slurp(dir + "/config.json"));
  config.erase("hidden_size");
  test::write_bytes(dir + "/config.json", config.dump());
  expect_clean_error(run_command(generate_cmd(dir)), "missing required field 'hidden_size'");
}

TEST(CliErrors, ConfigNotJson) {
  const std::string dir = copy_of_stories();
  test::write_bytes(dir + "/config.json", "{ not json");
  expect_clean_error(run_command(generate_cmd(dir)), "not valid JSON");
}

TEST(CliErrors, UnknownArchitecture) {
  const std::string dir = copy_of_stories();
  auto config = nlohmann::json::parse(test::slurp(dir + "/config.json"));
  config["model_type"] = "gpt2";
  test::write_bytes(dir + "/config.json", config.dump());
  expect_clean_error(run_command(generate_cmd(dir)), "unsupported model_type 'gpt2'");
}

TEST(CliErrors, TokenizerIsNotSentencePiece) {
  const std::string dir = copy_of_stories();
  test::write_bytes(dir + "/tokenizer.model", "this is not a protobuf");
  expect_clean_error(run_command(generate_cmd(dir)), "not a SentencePiece model");
}

TEST(CliErrors, PromptLongerThanContext) {
  std::string prompt;
  for (int i = 0; i < 600; ++i) prompt += "the cat sat. ";
  const std::string dir = test::make_temp_dir("kvc-long");
  test::write_bytes(dir + "/prompt.txt", prompt);
  expect_clean_error(run_command(generate_cmd(kStories, "--prompt-file " + dir + "/prompt.txt")),
                     "the model's context is 512");
}

TEST(CliErrors, BadFlagValues) {
  expect_clean_error(run_command(generate_cmd(kStories, "-p hi --temperature -1")), "--temperature");
  expect_clean_error(run_command(generate_cmd(kStories, "-p hi --top-p 0")), "--top-p");
  expect_clean_error(run_command(generate_cmd(kStories, "-p hi --device tpu")), "unknown device 'tpu'");
  // A mistyped text path fails while parsing, before the model loads (exit 2, a usage error).
  const auto missing = run_command(bin("kvc-eval") + " ppl -m " + kStories + " --file /nonexistent.txt");
  expect_clean_error(missing, "--file: file not found: '/nonexistent.txt'");
  EXPECT_EQ(missing.exit_code, 2);
  expect_clean_error(run_command(bin("kvc-calibrate") + " -m " + kStories + " -f " + test::repo_data_dir() +
                                 " -o /tmp/kvc_never_written"),
                     "is a folder, not a file");
  expect_clean_error(run_command(bin("kvc-eval") + " ppl -m " + kStories + " --window 1 --file " +
                                 test::data_file("tinystories/tinystories_excerpt_30k.txt")),
                     "--window");
  // kvc-bench's repeat counts must be positive (a usage error, exit 2, before any model loads).
  const auto repeats = run_command(bin("kvc-bench") + " -m " + kStories + " --decode-repeats 0");
  EXPECT_EQ(repeats.exit_code, 2);
  EXPECT_NE(repeats.err.find("--decode-repeats"), std::string::npos) << repeats.err;
  // kvc-eval sweep's --lockstep is a count of cells from 1 (a usage error, exit 2, before any model loads).
  const auto lockstep =
      run_command(bin("kvc-eval") + " sweep -m " + kStories + " --lockstep 0 --out-dir /tmp/kvc_never");
  EXPECT_EQ(lockstep.exit_code, 2);
  EXPECT_NE(lockstep.err.find("--lockstep"), std::string::npos) << lockstep.err;
  const auto usage = run_command(bin("kvc-generate") + " --no-such-flag");
  EXPECT_EQ(usage.exit_code, 2);
  const auto no_subcommand = run_command(bin("kvc-eval"));
  EXPECT_NE(no_subcommand.exit_code, 0);
}

// kvc-bench judges each timed decode run against the read bandwidth measured right before it (the median
// over the runs of the bound at that bandwidth over the run's step time), in its table and its JSON.
TEST(CliBench, EachDecodeRunIsJudgedAgainstTheBandwidthMeasuredBesideIt) {
  const auto r = run_command(bin("kvc-bench") + " -m " + kStories +
                             " --contexts 64 --decode-tokens 4 --decode-repeats 3 --prefill-repeats 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto out = nlohmann::json::parse(r.out);
  const auto& run = out["runs"][0];
  const double beside = run["decode_fraction_of_read_bound_beside"].get<double>();
  const double bandwidth = run["read_bandwidth_beside_gbs"].get<double>();
  EXPECT_GT(bandwidth, 0.0);
  EXPECT_GT(beside, 0.0);
  EXPECT_TRUE(std::isfinite(beside));
  EXPECT_NE(r.err.find("%rd-beside"), std::string::npos) << r.err;  // the table's column (on stderr with --json)
}

TEST(CliHelp, EveryToolHasHelpWithExamples) {
  for (const std::string tool : {"kvc-generate", "kvc-eval", "kvc-bench", "kvc-make-checkpoint"}) {
    const auto r = run_command(bin(tool) + " --help");
    EXPECT_EQ(r.exit_code, 0) << tool;
    EXPECT_NE(r.out.find("--"), std::string::npos) << tool;
  }
  EXPECT_NE(run_command(bin("kvc-generate") + " --help").out.find("Examples"), std::string::npos);
  EXPECT_NE(run_command(bin("kvc-eval") + " ppl --help").out.find("Example"), std::string::npos);
}

}  // namespace
}  // namespace kvc
