// Inputs that cannot be right, refused by the tools with one line and a non-zero exit: shapes no model
// has, config values no model uses, non-finite weights and artifacts, files longer than their header
// says, meaningless training and profiling flags, and writes that fail on a full disk.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "support/safetensors_rewrite.h"

namespace fs = std::filesystem;

namespace kvc {
namespace {

using test::bin;
using test::expect_clean_error;
using test::run_command;

const std::string kStories = test::model_dir("stories260K");
const std::string kText = test::data_file("tinystories/tinystories_excerpt_30k.txt");

// A copy of stories260K that a test may damage.
std::string copy_of_stories() {
  const std::string dir = test::make_temp_dir("kvc-bad-model");
  EXPECT_EQ(std::system(("cp " + kStories + "/* " + dir + "/").c_str()), 0);
  return dir;
}

std::string generate_cmd(const std::string& model_dir) {
  return bin("kvc-generate") + " -m " + model_dir + " -p 'Once upon a time' -n 2 -q -t 1";
}

// Runs `command` with writes limited to `kib` KiB per file: the kernel then fails a larger write
// (EFBIG) as a full disk would (ENOSPC). SIGXFSZ is ignored so the write fails instead of killing.
std::string with_file_size_limit(int kib, const std::string& command) {
  return "bash -c \"trap '' XFSZ; ulimit -f " + std::to_string(kib) + "; exec " + command + "\"";
}

// Overwrites bytes of one tensor in a safetensors file, in place.
void patch_tensor(const std::string& path, const std::string& tensor, const void* bytes, size_t size) {
  uint64_t data_start = 0;
  {
    const auto file = st::SafetensorsFile::open(path);
    std::ifstream in(path, std::ios::binary);
    uint64_t header_length = 0;
    in.read(reinterpret_cast<char*>(&header_length), 8);
    data_start = 8 + header_length + file->info(tensor).begin;
  }
  std::fstream out(path, std::ios::binary | std::ios::in | std::ios::out);
  out.seekp(static_cast<std::streamoff>(data_start));
  out.write(static_cast<const char*>(bytes), static_cast<std::streamsize>(size));
  ASSERT_TRUE(out.good()) << path;
}

void edit_config(const std::string& model_dir, const std::string& key, const nlohmann::json& value) {
  const std::string path = model_dir + "/config.json";
  nlohmann::json config = nlohmann::json::parse(test::slurp(path));
  config[key] = value;
  test::write_bytes(path, config.dump(2));
}

// ---- kvc-make-checkpoint ---------------------------------------------------------------------------

struct ShapeCase {
  const char* case_name;
  std::map<std::string, std::string> overrides;  // flag -> value, over a small valid shape
  std::string needle;
};

void PrintTo(const ShapeCase& c, std::ostream* os) { *os << c.case_name; }

class MakeCheckpointShapes : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(MakeCheckpointShapes, AreRefusedBeforeAnythingIsWritten) {
  const std::string out = test::make_temp_dir("kvc-bad-shape") + "/model";
  std::map<std::string, std::string> flags = {{"--hidden", "16"}, {"--intermediate", "32"}, {"--layers", "1"},
                                              {"--heads", "2"},   {"--kv-heads", "1"},      {"--head-dim", "8"},
                                              {"--vocab", "64"}};
  for (const auto& [flag, value] : GetParam().overrides) flags[flag] = value;
  std::string command = bin("kvc-make-checkpoint");
  for (const auto& [flag, value] : flags) command += " " + flag + " " + value;
  expect_clean_error(run_command(command + " -o " + out), GetParam().needle);
  EXPECT_FALSE(fs::exists(out));
}

INSTANTIATE_TEST_SUITE_P(
    ZeroOrNegative, MakeCheckpointShapes,
    ::testing::Values(
        ShapeCase{"KvHeadsZero", {{"--kv-heads", "0"}}, "num_key_value_heads (--kv-heads) must be at least 1"},
        ShapeCase{"HeadsZero", {{"--heads", "0"}}, "num_attention_heads (--heads) must be at least 1"},
        ShapeCase{"HiddenZero", {{"--hidden", "0"}}, "hidden_size (--hidden) must be at least 1"},
        ShapeCase{"LayersZero", {{"--layers", "0"}}, "num_hidden_layers (--layers) must be at least 1"},
        ShapeCase{"VocabZero", {{"--vocab", "0"}}, "vocab_size (--vocab) must be at least 1"},
        ShapeCase{"VocabNegative", {{"--vocab", "-5"}}, "vocab_size (--vocab) must be at least 1"},
        ShapeCase{"HeadsNotAMultiple", {{"--heads", "3"}, {"--kv-heads", "2"}}, "must be a multiple of"},
        ShapeCase{"OddHeadDim", {{"--head-dim", "7"}}, "head_dim (7) must be even"}),
    [](const ::testing::TestParamInfo<ShapeCase>& info) { return std::string(info.param.case_name); });

TEST(MakeCheckpointDiskFull, LeavesNoFolderAndNoPartialFiles) {
  const std::string parent = test::make_temp_dir("kvc-full-ckpt");
  const std::string out = parent + "/model";
  const auto r =
      run_command(with_file_size_limit(16, bin("kvc-make-checkpoint") +
                                               " --hidden 64 --intermediate 128 --layers 2 --heads 4 --kv-heads 2 "
                                               "--head-dim 16 --vocab 512 -o " +
                                               out));
  expect_clean_error(r, "cannot write '" + out + "/model.safetensors': File too large");
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(fs::is_empty(parent));
}

// ---- config.json ------------------------------------------------------------------------------------

struct ConfigCase {
  const char* case_name;
  const char* key;
  nlohmann::json value;
  std::string needle;
};

void PrintTo(const ConfigCase& c, std::ostream* os) { *os << c.case_name; }

class ConfigValues : public ::testing::TestWithParam<ConfigCase> {};

TEST_P(ConfigValues, NoModelUsesAreRefused) {
  const std::string model = copy_of_stories();
  edit_config(model, GetParam().key, GetParam().value);
  expect_clean_error(run_command(generate_cmd(model)), GetParam().needle);
}

INSTANTIATE_TEST_SUITE_P(
    OutsideAnyModel, ConfigValues,
    ::testing::Values(
        ConfigCase{"HugeRmsNormEps", "rms_norm_eps", 4294967328.0, "field 'rms_norm_eps' is 4294967328"},
        ConfigCase{"NegativeRmsNormEps", "rms_norm_eps", -1e-5, "'rms_norm_eps'"},
        ConfigCase{"ZeroRmsNormEps", "rms_norm_eps", 0, "'rms_norm_eps'"},
        ConfigCase{"HugeRopeTheta", "rope_theta", 1e30, "field 'rope_theta' is 1e+30"},
        ConfigCase{"ZeroRopeTheta", "rope_theta", 0, "'rope_theta'"},
        ConfigCase{"HiddenActNotAString", "hidden_act", 5, "field 'hidden_act' must be a string, got 5"},
        ConfigCase{"HiddenActUnknown", "hidden_act", "gelu", "hidden_act 'gelu' is not supported"},
        ConfigCase{"ZeroLayers", "num_hidden_layers", 0, "'num_hidden_layers' must be a positive integer"},
        ConfigCase{"NegativeVocab", "vocab_size", -512, "'vocab_size' must be a positive integer"},
        ConfigCase{"AbsurdHiddenSize", "hidden_size", int64_t{1} << 40, "'hidden_size' must be a positive integer"},
        ConfigCase{"HeadsNotAMultipleOfKvHeads", "num_key_value_heads", 3, "is not a multiple of num_key_value_heads"}),
    [](const ::testing::TestParamInfo<ConfigCase>& info) { return std::string(info.param.case_name); });

TEST(ConfigHeadDim, HiddenSizeMustSplitIntoHeadsWithoutAnExplicitHeadDim) {
  const std::string model = copy_of_stories();
  nlohmann::json config = nlohmann::json::parse(test::slurp(model + "/config.json"));
  config.erase("head_dim");
  config["num_attention_heads"] = 6;
  config["num_key_value_heads"] = 6;
  test::write_bytes(model + "/config.json", config.dump(2));
  expect_clean_error(run_command(generate_cmd(model)), "hidden_size (64) is not a multiple of num_attention_heads (6)");
}

// ---- Weights --------------------------------------------------------------------------------------

TEST(ModelWeights, NonFiniteWeightIsRefusedNamingTheTensor) {
  const std::string model = copy_of_stories();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  patch_tensor(model + "/model.safetensors", "model.layers.2.mlp.up_proj.weight", &nan, sizeof nan);
  expect_clean_error(run_command(generate_cmd(model)),
                     "tensor 'model.layers.2.mlp.up_proj.weight' holds a non-finite value");
}

TEST(ModelWeights, InfiniteWeightIsRefused) {
  const std::string model = copy_of_stories();
  const float inf = -std::numeric_limits<float>::infinity();
  patch_tensor(model + "/model.safetensors", "model.norm.weight", &inf, sizeof inf);
  expect_clean_error(run_command(generate_cmd(model)), "tensor 'model.norm.weight' holds a non-finite value");
}

TEST(ModelWeights, BytesInsertedIntoTheDataRegionAreRefused) {
  // The tensors' offsets no longer match the bytes: read as is, every weight would come out shifted.
  const std::string model = copy_of_stories();
  const std::string path = model + "/model.safetensors";
  std::string bytes = test::slurp(path);
  uint64_t header_length = 0;
  std::memcpy(&header_length, bytes.data(), 8);
  bytes.insert(8 + header_length + 1000, "vedved");
  test::write_bytes(path, bytes);
  expect_clean_error(run_command(generate_cmd(model)), "6 data bytes after the last tensor belong to no tensor");
}

// ---- Training and profiling flags, artifacts ----------------------------------------------------------

class LowRankBadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = test::make_temp_dir("kvc-bad-lowrank");
    const auto r = run_command(bin("kvc-calibrate") + " -m " + kStories + " -f " + kText +
                               " --tokens 2000 -c 128 -t 1 -o " + dir_ + "/bases.safetensors");
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static std::string train_cmd(const std::string& extra) {
    return bin("kvc-train") + " -m " + kStories + " --bases " + dir_ + "/bases.safetensors -f " + kText +
           " --warmup 1 -c 32 --eval-every 0 --eval-windows 1 -t 1 --json " + extra;
  }
  static inline std::string dir_;
};

TEST_F(LowRankBadInput, MeaninglessTrainingFlagsAreRefused) {
  const std::string out = dir_ + "/gates.safetensors";
  const std::string two_steps = "--steps 2 --batch 1 -o " + out;
  expect_clean_error(run_command(train_cmd("--lr nan " + two_steps)), "--lr must be a finite number > 0, got nan");
  expect_clean_error(run_command(train_cmd("--lr -1 " + two_steps)), "--lr must be a finite number > 0");
  expect_clean_error(run_command(train_cmd("--clip inf " + two_steps)), "--clip must be a finite number > 0");
  expect_clean_error(run_command(train_cmd("--steps 0 --batch 1 -o " + out)), "--steps must be at least 1, got 0");
  expect_clean_error(run_command(train_cmd("--steps -3 --batch 1 -o " + out)), "--steps must be at least 1");
  expect_clean_error(run_command(train_cmd("--steps 2 --batch 0 -o " + out)), "--batch must be at least 1");
  EXPECT_FALSE(fs::exists(out));
}

TEST_F(LowRankBadInput, CheckpointOnAFullDiskIsOneLineAndLeavesNoTemporary) {
  const std::string small = test::make_temp_dir("kvc-full-train");
  const std::string checkpoint = small + "/t.ckpt";
  const auto r = run_command(with_file_size_limit(
      4, train_cmd("--steps 2 --batch 1 --checkpoint " + checkpoint + " --checkpoint-every 1 -o " + small + "/g.st")));
  expect_clean_error(r, "cannot write '" + checkpoint + "': File too large");
  EXPECT_TRUE(fs::is_empty(small));
}

// A NaN patched into a basis kvc wrote fails its checksum; one in a file written with a valid checksum
// (as a tool that computed it would) is refused by the finite check, naming the tensor.
TEST_F(LowRankBadInput, NonFiniteBasisIsRefusedNamingTheTensor) {
  const std::string bases = dir_ + "/nan_bases.safetensors";
  fs::copy_file(dir_ + "/bases.safetensors", bases, fs::copy_options::overwrite_existing);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  patch_tensor(bases, "layers.1.v.U", &nan, sizeof nan);
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kStories + " -f " + kText +
                                 " -c 64 --max-windows 1 -t 1 --lowrank " + bases + " --rank 4"),
                     "fails its checksum");
  test::rewrite_safetensors(dir_ + "/bases.safetensors", bases, [&](test::TensorBytes& tensors, test::Metadata&) {
    std::memcpy(tensors.at("layers.1.v.U").data(), &nan, sizeof nan);  // a NaN with a valid checksum
  });
  expect_clean_error(run_command(bin("kvc-eval") + " kl -m " + kStories + " -f " + kText +
                                 " -c 64 --max-windows 1 -t 1 --lowrank " + bases + " --rank 4"),
                     "tensor 'layers.1.v.U' holds a non-finite value");
}

TEST(ProfileBadInput, ZeroWindowsIsRefused) {
  const std::string out = test::make_temp_dir("kvc-bad-profile") + "/p";
  const std::string base = bin("kvc-profile") + " -m " + kStories + " -f " + kText + " -c 128 -t 1 ";
  expect_clean_error(run_command(base + "--windows 0 --task-window 16 --out-dir " + out),
                     "--windows must be at least 1, got 0");
  expect_clean_error(run_command(base + "--windows 1 --task-window 0 --out-dir " + out),
                     "--task-window must be at least 1");
  EXPECT_FALSE(fs::exists(out + "/profile.safetensors"));
}

// A profile whose heatmaps cannot be drawn (here a gnuplot that fails, as on a full disk or without its
// terminal) is an error that leaves the output folder as it was: no folder where there was none, and an
// earlier profile untouched.
TEST(ProfileBadInput, AFailedRunLeavesTheFolderAsItWas) {
  const std::string dir = test::make_temp_dir("kvc-profile-fails");
  fs::create_directory(dir + "/bin");
  {
    std::ofstream fake(dir + "/bin/gnuplot");
    fake << "#!/bin/sh\necho 'gnuplot: cannot open output' >&2\nexit 1\n";
  }
  fs::permissions(dir + "/bin/gnuplot", fs::perms::owner_all);
  const std::string profile =
      bin("kvc-profile") + " -m " + kStories + " -f " + kText + " -c 64 --windows 1 -t 1 -q --out-dir ";
  const std::string failing = "PATH=" + dir + "/bin:$PATH " + profile;
  expect_clean_error(run_command(failing + dir + "/new"), "gnuplot failed");
  EXPECT_FALSE(fs::exists(dir + "/new"));
  ASSERT_EQ(run_command(profile + dir + "/old --no-plot").exit_code, 0);
  const auto listing = [&] {
    std::vector<std::string> names;  // hidden files (a staging folder) included
    for (const auto& e : fs::directory_iterator(dir + "/old")) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  const std::vector<std::string> names_before = listing();
  const std::string before = test::slurp(dir + "/old/profile.safetensors");
  expect_clean_error(run_command(failing + dir + "/old"), "gnuplot failed");
  EXPECT_EQ(test::slurp(dir + "/old/profile.safetensors"), before);
  EXPECT_EQ(listing(), names_before);
}

// kvc-bench --presses: an unknown method, nothing to compare with, an impossible ratio, no prompt or one that
// does not fit are each one line; a valid comparison reports every press.
TEST(BenchPressesBadInput, RefusedInOneLine) {
  const std::string base = bin("kvc-bench") + " -m " + kStories + " -t 1 --decode-tokens 4 ";
  expect_clean_error(run_command(base + "--contexts 50 --presses none,nosuch"), "unknown method 'nosuch'");
  expect_clean_error(run_command(base + "--contexts 50 --presses h2o"),
                     "--presses: give the reference and at least one press to compare (e.g. none,h2o)");
  expect_clean_error(run_command(base + "--contexts 50 --presses none,h2o --ratio 1.5"),
                     "--ratio must be in [0, 1), got 1.5");
  expect_clean_error(run_command(base + "--contexts 0 --presses none,h2o"), "--contexts: 0 is not a positive count");
  expect_clean_error(run_command(base + "--contexts 510 --presses none,h2o"),
                     "510 prompt tokens + 4 decode steps exceed the model's context of 512");
  const test::CommandResult ok = run_command(base + "--contexts 64 --presses none,h2o --ratio 0.5 --json");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const nlohmann::json j = nlohmann::json::parse(ok.out);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][1]["press"], "h2o");
  EXPECT_LT(j["runs"][1]["kv_resident_bytes"].get<int64_t>(), j["runs"][0]["kv_resident_bytes"].get<int64_t>());
}

// llama.cpp's spellings (-ctk/-ctv) reach the same check as the long flags; a type kvc does not store
// or a block type on a head size that is not whole blocks is named before any run starts.
TEST(CacheTypeBadInput, UnknownAndIncompatibleTypesAreOneLine) {
  const std::string base = bin("kvc-eval") + " kl -m " + kStories + " -f " + kText + " -c 64 --max-windows 1 -t 1 ";
  expect_clean_error(run_command(base + "-ctk q5"),
                     "--cache-type-k: unknown cache type 'q5' (expected f32, f16, bf16, q8_0 or q4_0)");
  expect_clean_error(run_command(base + "--cache-type-v q4_0"),
                     "blocks hold 32 values, but this model's head_dim is 8; use f16 or bf16");
  const test::CommandResult retrieval = run_command(base + "-ctv f16 --retrieval adaptive");
  EXPECT_EQ(retrieval.exit_code, 0) << retrieval.err;  // the store's records take the types
  const test::CommandResult ok = run_command(base + "-ctk f16 -ctv bf16 --json");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("\"compressed_kv_bytes\""), std::string::npos) << ok.out;
}

// --chat without a template, a template name or file kvc cannot use, a template that refuses the
// conversation, and a conversation past the context: one line each, before or instead of a reply.
TEST(ChatBadInput, RefusedInOneLine) {
  const std::string base = bin("kvc-generate") + " -m " + kStories + " -t 1 -n 4 ";
  expect_clean_error(run_command(base + "--chat -p hi"),
                     "has no chat template; pass --chat-template chatml|gemma|llama2|llama3|mistral|plain");
  expect_clean_error(run_command(base + "--chat --chat-template nosuch -p hi"), "--chat-template");
  const std::string dir = test::make_temp_dir("kvc-chat-bad");
  std::ofstream(dir + "/extends.jinja") << "{% extends 'base.jinja' %}";
  expect_clean_error(run_command(base + "--chat --chat-template " + dir + "/extends.jinja -p hi"), "extends.jinja");
  std::ofstream(dir + "/refuses.jinja") << "{{ raise_exception('only one turn, please') }}";
  expect_clean_error(run_command(base + "--chat --chat-template " + dir + "/refuses.jinja -p hi"),
                     "only one turn, please");
  expect_clean_error(run_command(base + "--chat --chat-template plain -c 16 -p 'Once upon a time there was a little "
                                        "girl who lived in a village near the forest.'"),
                     "the conversation reaches");
  expect_clean_error(run_command(base + "--system 'be brief' -p hi"), "add --chat");
  expect_clean_error(run_command(bin("kvc-eval") + " needle -m " + kStories + " --haystack " + kText +
                                 " --lengths 128 --depths 0 --samples 1 --chat -t 1"),
                     "has no chat template");
}

// A path or value with control characters (a terminal escape, a carriage return, a newline) is shown
// as escapes: the error stays one line and cannot recolour or overwrite the user's terminal.
TEST(ControlCharacters, AreEscapedInErrors) {
  const auto r = run_command(bin("kvc-generate") + " -m \"$(printf 'no\\033[2Jsuch\\rmodel\\nX')\" -p hi -n 1 -t 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no\\x1b[2Jsuch\\rmodel\\nX"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// An empty path (an unset shell variable) is refused by name, not read as "not given".
TEST(EmptyPaths, AreRefusedByTheFlag) {
  const std::string base = bin("kvc-generate") + " -m " + kStories + " -p hi -n 1 -q -t 1 ";
  expect_clean_error(run_command(base + "--json-out ''"), "--json-out: an empty path");
  expect_clean_error(run_command(base + "--lowrank ''"), "--lowrank: an empty path");
  expect_clean_error(run_command(base + "--press pyramidkv --ratio 0.5 --budgets ''"), "--budgets: an empty path");
  expect_clean_error(run_command(bin("kvc-calibrate") + " -m " + kStories + " -f " + kText + " -o ''"),
                     "--output: an empty path");
}

// ---- Outputs ---------------------------------------------------------------------------------------

TEST(PipeSafeOutputs, JsonOutThroughASymlinkKeepsTheLink) {
  const std::string dir = test::make_temp_dir("kvc-out-link");
  test::write_bytes(dir + "/stats.json", "old");
  fs::create_symlink("stats.json", dir + "/link.json");
  const auto r = run_command(generate_cmd(kStories) + " --json-out " + dir + "/link.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_symlink(dir + "/link.json"));
  EXPECT_EQ(nlohmann::json::parse(test::slurp(dir + "/stats.json"))["tool"], "kvc-generate");
}

TEST(PipeSafeOutputs, JsonOutToDevNullAndDashWork) {
  const auto null = run_command(generate_cmd(kStories) + " --json-out /dev/null");
  ASSERT_EQ(null.exit_code, 0) << null.err;
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  const auto dash = run_command(generate_cmd(kStories) + " --json-out - > /dev/null");
  EXPECT_EQ(dash.exit_code, 0) << dash.err;
}

TEST(PipeSafeOutputs, JsonOutIntoAMissingFolderNamesThePath) {
  const std::string wanted = test::make_temp_dir("kvc-out-missing") + "/no/such/stats.json";
  expect_clean_error(run_command(generate_cmd(kStories) + " --json-out " + wanted), "cannot write '" + wanted + "'");
}

}  // namespace
}  // namespace kvc
