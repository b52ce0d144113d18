// kvc-profile and the eviction flags of kvc-generate, run as a user would.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

std::string stories() { return test::model_dir("stories260K"); }
std::string text() { return test::data_file("tinystories/tinystories_excerpt_30k.txt"); }

void expect_clean_error(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0);
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << "more than one line: " << r.err;
  EXPECT_NE(r.err.find(": error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << "expected '" << needle << "' in: " << r.err;
}

std::string config_hash_of(const std::string& model) {
  const std::string dir = test::make_temp_dir("press_cli_hash");
  const auto r = test::run_command(test::bin("kvc-generate") + " -m " + model + " -p hi -n 1 -q -t 1 --stats-json " +
                                   dir + "/s.json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(test::slurp(dir + "/s.json"))["model_config_hash"];
}

class ProfileCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::make_temp_dir("press_cli_profile");
    const auto r =
        test::run_command(test::bin("kvc-profile") + " -m " + stories() + " --data " + text() +
                          " --context 128 --windows 2 --task-window 16 --ratios 0.5,0.75 -t 1 -o " + dir_ + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    summary_ = nlohmann::json::parse(r.out);
  }
  static std::string dir_;
  static nlohmann::json summary_;
};
std::string ProfileCli::dir_;
nlohmann::json ProfileCli::summary_;

TEST_F(ProfileCli, WritesProfileWithModelHashAndBudgets) {
  auto f = st::SafetensorsFile::open(dir_ + "/profile.safetensors");
  EXPECT_EQ(f->metadata().at("config_hash"), config_hash_of(stories()));
  EXPECT_EQ(f->metadata().at("data_hash").size(), 16u);
  for (const char* name : {"layer_variance", "layer_entropy", "kvcompose_retention", "kvcompose_head_retention",
                           "dynamickv_retention", "layer_budget_shares", "d2o_layer_weights", "ratios"}) {
    EXPECT_TRUE(f->contains(name)) << name;
  }
  EXPECT_EQ(f->info("layer_budget_shares").shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(f->info("kvcompose_head_retention").shape, (std::vector<int64_t>{2, 5, 4}));
  // Each row of budget shares sums to 1 (the totals are set by --ratio at run time).
  const auto* shares = reinterpret_cast<const double*>(f->data("layer_budget_shares"));
  for (int r = 0; r < 2; ++r) {
    double sum = 0;
    for (int l = 0; l < 5; ++l) sum += shares[r * 5 + l];
    EXPECT_NEAR(sum, 1.0, 1e-9);
  }
  // CSV: a header and one row per layer.
  std::ifstream csv(dir_ + "/profile.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  EXPECT_EQ(lines, 6);
  EXPECT_EQ(summary_["layer_variance"].size(), 5u);
  if (std::system("command -v gnuplot > /dev/null 2>&1") == 0) {
    EXPECT_GT(test::slurp(dir_ + "/heatmap_layers_ratio.png").size(), 1000u);
  }
}

TEST_F(ProfileCli, GenerateUsesBudgetsAndRefusesForeignModel) {
  const std::string base = test::bin("kvc-generate") + " -p 'Once upon a time there was a little girl' -n 8 -q -t 1 " +
                           "--press snapkv:window=4 --ratio 0.5 --budgets " + dir_ + "/profile.safetensors";
  const auto ok = test::run_command(base + " -m " + stories());
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  expect_clean_error(test::run_command(base + " -m " + test::model_dir("kvc-micro-lm")), "made for another model");
  expect_clean_error(
      test::run_command(test::bin("kvc-generate") + " -m " + stories() +
                        " -p hi -n 2 -q --press snapkv --ratio 0.3 --budgets " + dir_ + "/profile.safetensors"),
      "no budgets for --ratio 0.3");
}

TEST(PressCli, BoundedCacheDecodesPastTheContextInFlatMemory) {
  const std::string dir = test::make_temp_dir("press_cli_long");
  const auto r = test::run_command(test::bin("kvc-generate") + " -m " + stories() +
                                   " -p 'Once upon a time' --press h2o --budget 32 -n 700 --ignore-eos -q -t 1 "
                                   "--stats-json " +
                                   dir + "/s.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto s = nlohmann::json::parse(test::slurp(dir + "/s.json"));
  EXPECT_EQ(s["generated_tokens"], 700);  // past stories260K's 512-token context
  EXPECT_EQ(s["stop_reason"], "max_new_tokens");
  EXPECT_EQ(s["kv_entries"], 32 * 5 * 4);
  EXPECT_EQ(s["kv_peak_resident_bytes"], s["kv_resident_bytes"]);
  // Without a bound the same request stops at the context.
  const auto full =
      test::run_command(test::bin("kvc-generate") + " -m " + stories() +
                        " -p 'Once upon a time' -n 700 --ignore-eos -q -t 1 --stats-json " + dir + "/f.json");
  EXPECT_EQ(nlohmann::json::parse(test::slurp(dir + "/f.json"))["stop_reason"], "context");
}

TEST(PressCli, BadInputIsOneLineError) {
  expect_clean_error(test::run_command(test::bin("kvc-generate") + " -m " + stories() +
                                       " -p hi -n 2 --press snapkv:windw=3 --ratio 0.5"),
                     "unknown parameter 'windw'");
  expect_clean_error(test::run_command(test::bin("kvc-profile") + " -m " + stories() + " -o /tmp/x"), "-f/--file");
  expect_clean_error(test::run_command(test::bin("kvc-profile") + " -m " + stories() + " --data " + text() +
                                       " -o /tmp/kvc_profile_bad --ratios 1.5"),
                     "--ratios");
}

// kvc-eval --dump-kept DIR: one file per sample, named by its id, holding the positions each layer x KV head
// kept; with a budget of 24 every head keeps exactly 24 of the prompt's positions, all inside the prompt.
TEST(EvalCli, DumpKeptWritesOneFilePerSample) {
  const std::string dir = test::make_temp_dir("press_cli_eval_dump");
  const auto r = test::run_command(test::bin("kvc-eval") + " needle -m " + stories() + " --haystack " + text() +
                                   " --lengths 96 --depths 0,1 --samples 1 --templates passkey --press snapkv "
                                   "--budget 24 -t 1 --json --dump-kept " +
                                   dir + "/kept");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, int64_t> prompt_tokens_of;  // sample id -> prompt tokens, as the report says
  const nlohmann::json report = nlohmann::json::parse(r.out);
  for (const auto& cell : report["cells"])
    for (const auto& sample : cell["samples"]) prompt_tokens_of[sample["id"]] = sample["prompt_tokens"];
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/kept")) files.push_back(e.path().string());
  ASSERT_EQ(files.size(), 2u);
  for (const auto& path : files) {
    auto file = st::SafetensorsFile::open(path);
    const auto& meta = file->metadata();
    const std::string id = meta.at("sample_id");
    EXPECT_NE(path.find(id), std::string::npos) << path;
    ASSERT_EQ(prompt_tokens_of.count(id), 1u) << id;
    EXPECT_EQ(std::stoll(meta.at("prompt_tokens")), prompt_tokens_of[id]);
    for (int64_t l = 0; l < std::stoll(meta.at("num_layers")); ++l) {
      for (int64_t h = 0; h < std::stoll(meta.at("num_kv_heads")); ++h) {
        const auto& kept = file->info("kept." + std::to_string(l) + "." + std::to_string(h));
        ASSERT_EQ(kept.shape.size(), 1u);
        EXPECT_EQ(kept.shape[0], 24);
      }
    }
  }
  expect_clean_error(test::run_command(test::bin("kvc-eval") + " needle -m " + stories() + " --haystack " + text() +
                                       " --lengths 96 --depths 0 --samples 1 -t 1 --dump-kept " + dir + "/none"),
                     "needs a token-eviction method (--press)");
}

// --list-presses answers alone, like --help: no model or text needed, and nothing else runs.
TEST(PressCli, ListPressesAnswersWithoutTheRequiredOptions) {
  for (const std::string command : {"kvc-generate --list-presses", "kvc-eval kl --list-presses",
                                    "kvc-eval needle --list-presses", "kvc-eval ppl --help"}) {
    const auto r =
        test::run_command(test::bin(command.substr(0, command.find(' '))) + command.substr(command.find(' ')));
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    if (command.find("--list-presses") == std::string::npos) continue;
    EXPECT_NE(r.out.find("snapkv"), std::string::npos) << command << ": " << r.out;
    EXPECT_EQ(r.out.find("KL"), std::string::npos) << command << " ran an evaluation: " << r.out;
  }
}

// --prompt-tokens: benchmarks at an exact context length keep the first N prompt tokens (BOS included).
// A budget below what the press always keeps (snapkv's 32-entry window) leaves it nothing to select: one
// warning for the run (not one per layer), naming the numbers; a window that fits the budget is silent.
TEST(PressCli, WarnsOnceWhenTheBudgetIsBelowTheProtectedWindow) {
  const std::string run =
      test::bin("kvc-generate") + " -m " + stories() + " -f " + text() + " --prompt-tokens 38 -n 2 -q -t 1 --press ";
  const auto below = test::run_command(run + "snapkv --ratio 0.5");
  ASSERT_EQ(below.exit_code, 0) << below.err;
  const std::string expected =
      "warning: --press snapkv keeps 19 of the 38 prompt entries per KV head in layer 0, "
      "fewer than the 32 it always keeps";
  const auto first = below.err.find(expected);
  EXPECT_NE(first, std::string::npos) << below.err;
  EXPECT_EQ(below.err.find("warning:", first + 1), std::string::npos) << "more than one warning: " << below.err;
  for (const char* fits : {"snapkv --ratio 0.15", "snapkv:window=8 --ratio 0.5", "snapkv --budget 32"}) {
    const auto r = test::run_command(run + fits);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("warning:"), std::string::npos) << fits << ": " << r.err;
  }
  // Heads keeping different numbers (CriticalAdaKV protects half of each head's own count): each head is held
  // against its own protected entries, not the layer's largest protected set against its smallest count.
  const auto per_head =
      test::run_command(test::bin("kvc-generate") + " -m " + stories() + " -f " + text() +
                        " --prompt-tokens 200 -n 2 -q -t 1 --press criticalkv_ada:window=8 --ratio 0.5");
  ASSERT_EQ(per_head.exit_code, 0) << per_head.err;
  EXPECT_EQ(per_head.err.find("warning:"), std::string::npos) << per_head.err;
}

TEST(GenerateCli, PromptTokensKeepsExactlyTheFirstN) {
  const std::string dir = test::make_temp_dir("press_cli_prompt_tokens");
  const auto r = test::run_command(test::bin("kvc-generate") + " -m " + stories() + " -f " + text() +
                                   " --prompt-tokens 37 -n 2 -q -t 1 --stats-json " + dir + "/s.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(test::slurp(dir + "/s.json"));
  EXPECT_EQ(j["prompt_tokens"], 37);
  ASSERT_EQ(j["prompt_ids"].size(), 37u);
  EXPECT_EQ(j["prompt_ids"][0], 1);
  expect_clean_error(
      test::run_command(test::bin("kvc-generate") + " -m " + stories() + " -p hi --prompt-tokens 50 -n 1 -q -t 1"),
      "--prompt-tokens 50: the prompt has only");
}

}  // namespace
}  // namespace kvc
