// kvc-cluster as a user runs it: bad input ends in one clear line; build + verify round-trips; a
// build killed mid-write is reported incomplete, never read; replay reports sane JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

using test::bin;
using test::run_command;

const std::string kModel = test::model_dir("stories260K");

using test::expect_clean_error;

std::string cluster(const std::string& args) { return bin("kvc-cluster") + " " + args; }

// The names in a folder, hidden files included (a temporary file is ".NAME.tmp.PID.N"), sorted.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Spec parsing is covered in test_retrieval_store; here, that errors reach the user as one line.
TEST(ClusterCli, BadInput) {
  const std::string prompt = " -m " + kModel + " -p 'Once upon a time there was a little girl' ";
  expect_clean_error(run_command(cluster("replay" + prompt + "-n 2 -s bogus")), "unknown strategy 'bogus'");
  expect_clean_error(run_command(cluster("verify --index /nonexistent/i.safetensors")), "no commit record");
}

TEST(ClusterCli, BuildVerifyAndCrash) {
  const std::string dir = test::make_temp_dir("kvc-cluster-cli");
  const std::string build = cluster("build -m " + kModel +
                                    " -p 'Once upon a time there was a little girl named Lily. "
                                    "She liked to play in the park with her dog.' --store " +
                                    dir + "/s.kvs --index " + dir + "/s.safetensors");
  auto r = run_command(build + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["clusters"].get<int64_t>(), 0);
  EXPECT_EQ(j["entries"].get<int64_t>() % 4, 0) << "every token of every KV head (4) is in the map";
  EXPECT_EQ(j["thresholds"].size(), 5u) << "τ_h for every layer";
  r = run_command(cluster("verify --index " + dir + "/s.safetensors"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("complete"), std::string::npos);

  // Rebuild into the same store, killed during its 3rd page write: the new store is built beside the
  // old one, so the old store and its index stay whole.
  r = run_command("KVC_STORE_CRASH_AFTER_PAGES=2 " + build + "2");  // index path s.safetensors2: never written
  EXPECT_GE(r.exit_code, 128) << "the crash hook should kill the run";
  r = run_command(cluster("verify --index " + dir + "/s.safetensors"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("complete"), std::string::npos);
  expect_clean_error(run_command(cluster("verify --index " + dir + "/s.safetensors2")), "no commit record");
  // Restarted, the build rewrites the store from scratch and commits again.
  r = run_command(build);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = run_command(cluster("verify --index " + dir + "/s.safetensors"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// A rebuild whose index cannot be written (here /dev/full: every write fails with ENOSPC, as on a full
// disk) fails naming the index as given, and leaves the committed pair as it was: the new store never
// replaces the old one without its index, and no store or temporary file is left.
TEST(ClusterCli, ARebuildThatCannotWriteItsIndexLeavesTheOldPairWhole) {
  if (!std::filesystem::is_character_file("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  const std::string dir = test::make_temp_dir("kvc-cluster-full");
  const std::string build =
      cluster("build -m " + kModel + " -p 'Once upon a time there was a little girl named Lily.' " + "--store " + dir +
              "/s.kvs --index ");
  auto r = run_command(build + dir + "/s.safetensors");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string store_before = test::slurp(dir + "/s.kvs");
  expect_clean_error(run_command(build + "/dev/full"), "cannot write '/dev/full'");
  EXPECT_EQ(test::slurp(dir + "/s.kvs"), store_before);
  r = run_command(cluster("verify --index " + dir + "/s.safetensors"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"s.kvs", "s.safetensors"}));
  // A first build that fails leaves no store at all.
  const std::string fresh = test::make_temp_dir("kvc-cluster-full-fresh");
  expect_clean_error(run_command(cluster("build -m " + kModel + " -p 'Once upon a time' --store " + fresh +
                                         "/s.kvs --index /dev/full")),
                     "cannot write '/dev/full'");
  EXPECT_TRUE(names_in(fresh).empty());
}

TEST(ClusterCli, ReplayJson) {
  const std::string dir = test::make_temp_dir("kvc-cluster-replay");
  // 200 prompt tokens: enough for full pages (56 entries of head_dim 8) to reach the store.
  const auto r = run_command(
      cluster("replay -m " + kModel + " -f " + test::data_file("tinystories/tinystories_excerpt_30k.txt") +
              " --prompt-tokens 200 -n 12 -s adaptive -s static:topk=1000 -s none --json --out-dir " + dir));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["strategies"].size(), 3u);
  EXPECT_EQ(j["steps"].get<int64_t>(), 12);
  for (const auto& s : j["strategies"]) {
    EXPECT_GE(s["mean_recall"].get<double>(), 0.0);
    EXPECT_LE(s["mean_recall"].get<double>(), 1.0 + 1e-6);
    EXPECT_GE(s["mean_kl"].get<double>(), -1e-9);
  }
  // Every cluster read: exact attention, so recall 1 and KL ~ 0.
  EXPECT_NEAR(j["strategies"][1]["mean_recall"].get<double>(), 1.0, 1e-5);
  EXPECT_LT(j["strategies"][1]["mean_kl"].get<double>(), 1e-6);
  EXPECT_GT(j["strategies"][2]["read_ops"].get<int64_t>(), 0);
  EXPECT_EQ(test::slurp(dir + "/steps.csv").substr(0, 5), "step,");
}

TEST(ClusterCli, GenerateWithRetrieval) {
  // Past the model's 512-token context with the cache on storage; greedy, so the run is reproducible.
  const std::string dir = test::make_temp_dir("kvc-generate-retrieval");
  const auto r = run_command(bin("kvc-generate") + " -m " + kModel + " -p 'Once upon a time' -n 520 --ignore-eos -q " +
                             "--temperature 0 --retrieval adaptive:budget=32 --retrieval-store " + dir + "/s.kvs");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("retrieval adaptive:budget=32: read"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("520 generated"), std::string::npos) << r.err;
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + kModel + " -p 'Once' -n 2 --retrieval none"),
                     "--retrieval none");
}

// --retrieval goes through the same compression spec as --press and --lowrank, so kvc-eval evaluates it.
// Prefill attends exactly and each decoded token reads back at most 64 entries per head: the decode
// differs from the exact model (KL > 0), but not wildly, and each sequence's temporary store is removed.
TEST(ClusterCli, EvalKlAndNeedleWithRetrieval) {
  const std::string tmp = test::make_temp_dir("kvc-eval-retrieval");
  const std::string eval = "TMPDIR=" + tmp + " " + bin("kvc-eval");
  auto r = run_command(eval + " kl -m " + kModel + " -f " + test::data_file("wikitext2/wiki.test.raw") +
                       " -c 256 --max-windows 2 --retrieval adaptive:budget=64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["kl"].get<double>(), 0.0) << "64 of up to 255 entries per head cannot be exact";
  EXPECT_LT(j["kl"].get<double>(), 1.0);
  EXPECT_GT(j["top1_agreement"].get<double>(), 0.5);
  EXPECT_LE(j["top1_agreement"].get<double>(), 1.0);
  EXPECT_EQ(test::run_command("ls " + tmp).out, "") << "temporary stores are removed with their cache";

  r = run_command(eval + " needle -m " + test::model_dir("kvc-micro-lm") + " --haystack " +
                  test::data_file("pg_essays") +
                  " --lengths 256 --depths 0.5 --samples 2 "
                  "--retrieval adaptive:budget=64 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = nlohmann::json::parse(r.out);
  EXPECT_NE(j.dump().find("retrieval adaptive:budget=64"), std::string::npos) << "the method is named in the results";

  expect_clean_error(run_command(eval + " kl -m " + kModel + " -f " + test::data_file("wikitext2/wiki.test.raw") +
                                 " --retrieval adaptive --press snapkv --ratio 0.5"),
                     "cannot be combined with --press or --lowrank");
}

// An index whose commit record lost its extents (emptied, or one cluster's cut) names the damage
// instead of verifying "complete" over nothing.
TEST(ClusterCli, AnIndexWithoutItsExtentsDoesNotVerify) {
  const std::string dir = test::make_temp_dir("kvc-cluster-extents");
  auto r =
      run_command(cluster("build -m " + kModel + " -p 'Once upon a time there was a little girl named Lily.' --store " +
                          dir + "/s.kvs --index " + dir + "/s.safetensors"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rewrite_with_extents = [&](int64_t rows) {
    const auto file = st::SafetensorsFile::open(dir + "/s.safetensors");
    st::SafetensorsWriter w;
    for (const auto& [key, value] : file->metadata()) w.set_metadata(key, value);
    for (const std::string& name : file->names()) {
      const st::TensorInfo& info = file->info(name);
      std::vector<int64_t> shape = info.shape;
      size_t bytes = info.nbytes();
      if (name == "extents") {
        shape[0] = rows;
        bytes = static_cast<size_t>(rows) * 6 * 8;
      }
      w.add(name, info.dtype, shape, file->data(name), bytes);
    }
    w.write(dir + "/damaged.safetensors");
  };
  const int64_t extents = st::SafetensorsFile::open(dir + "/s.safetensors")->info("extents").shape[0];
  ASSERT_GT(extents, 1);
  for (const int64_t rows : {int64_t{0}, extents - 1}) {
    rewrite_with_extents(rows);
    expect_clean_error(run_command(cluster("verify --index " + dir + "/damaged.safetensors")),
                       "extents in the commit record");
  }
}

}  // namespace
}  // namespace kvc
