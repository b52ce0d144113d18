// --threads as a user gives it: out-of-range counts end in one line and a non-zero exit (a huge count
// once hung the tool), any accepted count gives the same greedy text, and the OpenMP spin bound is in
// place before libgomp starts unless the user chose a wait policy.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

using test::bin;
using test::expect_clean_error;
using test::run_command;

// `timeout` turns a hang into exit code 124 instead of a stuck test.
std::string generate(const std::string& extra, const std::string& env = "") {
  return env + " timeout 120 " + bin("kvc-generate") + " -m " + test::model_dir("stories260K") +
         " -p 'Once upon a time' -n 12 --temperature 0 " + extra;
}

int hardware_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

TEST(ThreadsCli, ZeroIsRefusedInOneLine) { expect_clean_error(run_command(generate("--threads 0")), "--threads"); }

TEST(ThreadsCli, NegativeIsRefusedInOneLine) { expect_clean_error(run_command(generate("-t -3")), "--threads"); }

TEST(ThreadsCli, HugeCountIsRefusedInOneLine) {
  const auto r = run_command(generate("--threads 100000"));
  expect_clean_error(r, "--threads");
  EXPECT_NE(r.err.find(std::to_string(4 * hardware_threads())), std::string::npos) << "names the maximum: " << r.err;
}

TEST(ThreadsCli, ThousandThreadsDoesNotHang) {
  const auto r = run_command(generate("--threads 1000"));
  ASSERT_NE(r.exit_code, 124) << "timed out";
  if (1000 > 4 * hardware_threads()) {
    expect_clean_error(r, "--threads");
  } else {
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }
}

TEST(ThreadsCli, EveryAcceptedCountGivesTheSameText) {
  const auto one = run_command(generate("-t 1"));
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const std::vector<std::string> counts = {"", "-t 2", "--threads " + std::to_string(4 * hardware_threads())};
  for (const std::string& extra : counts) {
    const auto r = run_command(generate(extra));
    ASSERT_EQ(r.exit_code, 0) << extra << ": " << r.err;
    EXPECT_EQ(r.out, one.out) << extra;
  }
}

// libgomp reads its environment once, when it is loaded; OMP_DISPLAY_ENV prints what it read on stderr.
long spin_count_read(const std::string& err) {
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = err.find(key);
  return at == std::string::npos ? -1 : std::stol(err.substr(at + key.size()));
}

TEST(ThreadsCli, OpenMpSpinIsBoundedUnlessTheUserChose) {
  const auto ours = run_command(generate("-t 1", "OMP_DISPLAY_ENV=VERBOSE"));
  ASSERT_EQ(ours.exit_code, 0) << ours.err;
  const long spin = spin_count_read(ours.err);
  EXPECT_GT(spin, 0) << ours.err;
  EXPECT_LT(spin, 300000) << "libgomp's default spin (milliseconds) is back";
  const auto users = run_command(generate("-t 1", "OMP_DISPLAY_ENV=VERBOSE GOMP_SPINCOUNT=12345"));
  ASSERT_EQ(users.exit_code, 0) << users.err;
  EXPECT_EQ(spin_count_read(users.err), 12345);
}

}  // namespace
}  // namespace kvc
