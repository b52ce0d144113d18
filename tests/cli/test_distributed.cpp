// The tools over two ranks on one machine (c10d over 127.0.0.1). kvc-calibrate: the bases equal one
// process's, and a rank that never comes, ranks started with different flags, and a port already taken
// each end in a one-line error within the stated timeout. kvc-train: the gates equal one process's with
// the same global batch, Ctrl-C on one rank stops both with a checkpoint that resumes to the same gates,
// and a killed rank ends the other in one line naming that checkpoint. kvc-eval sweep: shards merged
// give the unsharded sweep's table.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
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

const std::string kCalibrate = " -m " + test::model_dir("stories260K") + " -f " +
                               test::data_file("tinystories/tinystories_excerpt_30k.txt") + " --ctx-size 128 -t 1 ";

// A listening socket on a port the kernel chose: the port stays taken while the socket lives.
struct HeldPort {
  int fd = -1, port = 0;
  HeldPort() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    ::listen(fd, 1);
    socklen_t n = sizeof a;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n);
    port = ntohs(a.sin_port);
  }
  ~HeldPort() { ::close(fd); }
};

// A port free now: taken by the kernel, then released.
int free_port() { return HeldPort().port; }

// `world` ranks of `command` (rank r with `extra[r]` appended) started in the background in `dir`, each
// with its stdout, stderr and pid in out<r>.txt, err<r>.txt and $p<r>; `then` runs while they do (it may
// signal them), and then every rank is waited for. stdout: each rank's exit code, one a line; stderr:
// every rank's stderr.
test::CommandResult run_ranks(const std::string& command, int world, int port, const std::vector<std::string>& extra,
                              const std::string& dir, const std::string& then = "") {
  std::string cmd = "cd " + dir + " || exit 9; ";
  for (int r = 0; r < world; ++r) {
    const std::string n = std::to_string(r);
    cmd += "MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=" + std::to_string(world) +
           " RANK=" + n + " " + command + " " + extra[static_cast<size_t>(r)] + " > out" + n + ".txt 2> err" + n +
           ".txt & p" + n + "=$!; ";
  }
  if (!then.empty()) cmd += then + "; ";
  for (int r = 0; r < world; ++r) cmd += "wait $p" + std::to_string(r) + "; echo $?; ";
  cmd += "for r in $(seq 0 " + std::to_string(world - 1) + "); do cat err$r.txt >&2; done";
  return run_command("{ " + cmd + "; }");  // one group, so that run_command's redirections take all of it
}

test::CommandResult run_ranks(int world, int port, const std::vector<std::string>& extra, const std::string& dir) {
  return run_ranks(bin("kvc-calibrate") + kCalibrate, world, port, extra, dir);
}

std::vector<double> tensor_values(const st::SafetensorsFile& f, const std::string& name) {
  const st::TensorInfo& info = f.info(name);
  std::vector<double> out(static_cast<size_t>(info.numel()));
  const uint8_t* p = f.data(name);
  for (size_t i = 0; i < out.size(); ++i) {
    if (info.dtype == st::DType::F64) {
      double v;
      std::memcpy(&v, p + 8 * i, 8);
      out[i] = v;
    } else {
      float v;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

TEST(DistributedCalibrate, TwoRanksGiveTheBasesOfOneProcess) {
  const std::string dir = test::make_temp_dir("kvc-dist");
  const test::CommandResult one =
      run_command(bin("kvc-calibrate") + kCalibrate + "--tokens 6000 -o " + dir + "/one.safetensors");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult two = run_ranks(
      2, free_port(),
      {"--tokens 6000 --dist-timeout 30 -o two.safetensors", "--tokens 6000 --dist-timeout 30 -o two.safetensors"},
      dir);
  ASSERT_EQ(two.out, "0\n0\n") << two.err;
  const auto a = st::SafetensorsFile::open(dir + "/one.safetensors");
  const auto b = st::SafetensorsFile::open(dir + "/two.safetensors");
  ASSERT_EQ(a->names(), b->names());
  EXPECT_EQ(a->metadata().at("tokens"), b->metadata().at("tokens"));
  for (const std::string& name : a->names()) {
    const std::vector<double> x = tensor_values(*a, name), y = tensor_values(*b, name);
    ASSERT_EQ(x.size(), y.size()) << name;
    if (name.find("eigenvalues") != std::string::npos) {
      // float64 sums added in another order: equal to rounding, relative to the largest eigenvalue.
      for (size_t i = 0; i < x.size(); ++i) EXPECT_LE(std::fabs(x[i] - y[i]), 1e-12 * x[0]) << name << " " << i;
    } else {
      // Eigenvectors (stored in float32), each defined up to its sign.
      const size_t d = static_cast<size_t>(std::lround(std::sqrt(static_cast<double>(x.size()))));
      for (size_t col = 0; col < d; ++col) {
        double dot = 0;
        for (size_t row = 0; row < d; ++row) dot += x[row * d + col] * y[row * d + col];
        EXPECT_NEAR(std::fabs(dot), 1.0, 1e-5) << name << " column " << col;
      }
    }
  }
  // Only rank 0 writes and reports.
  EXPECT_NE(test::slurp(dir + "/out0.txt").find("wrote two.safetensors"), std::string::npos);
  EXPECT_EQ(test::slurp(dir + "/out1.txt"), "");
}

// Ctrl-C on one rank stops both within a second (not at the end of their shares), each exits 130, and
// nothing is written.
TEST(DistributedCalibrate, CtrlCOnOneRankStopsBothAtOnceAndWritesNothing) {
  const std::string dir = test::make_temp_dir("kvc-dist-calibrate-int");
  // All of WikiText-2's test split: 9 s of calibration on two ranks here; the signal comes after 2 s.
  const std::string command = bin("kvc-calibrate") + " -m " + test::model_dir("stories260K") + " -f " +
                              test::data_file("wikitext2/wiki.test.raw") +
                              " --ctx-size 128 -t 1 --tokens 100000000 --dist-timeout 30 -o two.safetensors";
  // The signal goes once both ranks catch SIGINT (bit 2 of /proc/PID/status's SigCgt mask): on a busy
  // machine LibTorch may take seconds to load, and a SIGINT before the handler would kill the rank outright.
  const std::string once_both_catch_it =
      "for p in $p0 $p1; do while kill -0 $p 2>/dev/null && [ $(( 0x$(awk '/^SigCgt/ {print $2}' /proc/$p/status "
      "2>/dev/null || echo 0) & 2 )) -eq 0 ]; do sleep 0.05; done; done; sleep 2; date +%s.%N > signal_time; kill -INT "
      "$p1";
  const test::CommandResult stopped = run_ranks(command, 2, free_port(), {"", ""}, dir, once_both_catch_it);
  const double seconds = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count() -
                         std::stod(test::slurp(dir + "/signal_time"));
  ASSERT_EQ(stopped.out, "130\n130\n") << stopped.err;
  EXPECT_NE(test::slurp(dir + "/err0.txt").find("calibration interrupted; nothing written"), std::string::npos)
      << stopped.err;
  EXPECT_FALSE(std::ifstream(dir + "/two.safetensors").good());
  EXPECT_LT(seconds, 4.0) << "the ranks went on after the interrupt";
}

TEST(DistributedCalibrate, AMissingRankEndsInOneLineWithinTheTimeout) {
  const std::string dir = test::make_temp_dir("kvc-dist-missing");
  const auto start = std::chrono::steady_clock::now();
  const test::CommandResult r = run_ranks(1, free_port(), {"--tokens 2000 --dist-timeout 3 -o x.safetensors"}, dir);
  // A world of 2 announced, one rank started.
  const test::CommandResult lone = run_command(
      "cd " + dir + " && MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(free_port()) + " WORLD_SIZE=2 RANK=0 " +
      bin("kvc-calibrate") + kCalibrate + "--tokens 2000 --dist-timeout 3 -o x.safetensors");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.out, "0\n") << r.err;  // a world of one needs nobody
  test::expect_clean_error(lone, "the ranks did not all join at 127.0.0.1:");
  EXPECT_LT(seconds, 20.0);
  EXPECT_FALSE(std::ifstream(dir + "/x.safetensors.tmp").good());
}

TEST(DistributedCalibrate, RanksWithDifferentFlagsStopInOneLine) {
  const std::string dir = test::make_temp_dir("kvc-dist-flags");
  const test::CommandResult r = run_ranks(
      2, free_port(),
      {"--tokens 2000 --dist-timeout 30 -o y.safetensors", "--tokens 3000 --dist-timeout 30 -o y.safetensors"}, dir);
  EXPECT_EQ(r.out, "1\n1\n") << r.err;
  EXPECT_NE(r.err.find("the ranks were started with different --tokens or --ctx-size"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir + "/y.safetensors").good());
}

TEST(DistributedCalibrate, APortInUseIsNamed) {
  const HeldPort held;
  const test::CommandResult r =
      run_command("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(held.port) + " WORLD_SIZE=2 RANK=0 " +
                  bin("kvc-calibrate") + kCalibrate + "--tokens 2000 --dist-timeout 3 -o /tmp/kvc-never.safetensors");
  test::expect_clean_error(r, "the port is in use; choose another MASTER_PORT");
}

TEST(DistributedCalibrate, MalformedEnvironmentAndBackendAreOneLine) {
  test::expect_clean_error(run_command("WORLD_SIZE=2 RANK=2 " + bin("kvc-calibrate") + kCalibrate + "-o /tmp/z.st"),
                           "environment variable RANK='2': expected an integer in 0..1");
  test::expect_clean_error(run_command(bin("kvc-calibrate") + kCalibrate + "--dist-backend nccl -o /tmp/z.st"),
                           "--dist-backend nccl: this build's LibTorch has no NCCL");
}

// Largest absolute difference over every tensor of two artifacts with the same tensor names.
double max_difference(const std::string& a_path, const std::string& b_path) {
  const auto a = st::SafetensorsFile::open(a_path);
  const auto b = st::SafetensorsFile::open(b_path);
  EXPECT_EQ(a->names(), b->names());
  double worst = 0;
  for (const std::string& name : a->names()) {
    const std::vector<double> x = tensor_values(*a, name), y = tensor_values(*b, name);
    EXPECT_EQ(x.size(), y.size()) << name;
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) worst = std::max(worst, std::fabs(x[i] - y[i]));
  }
  return worst;
}

const std::string kTrainData = test::data_file("tinystories/tinystories_excerpt_30k.txt");

// Bases for the training tests, calibrated once.
const std::string& train_bases() {
  static const std::string path = [] {
    const std::string p = test::make_temp_dir("kvc-dist-bases") + "/bases.safetensors";
    const test::CommandResult r = run_command(bin("kvc-calibrate") + kCalibrate + "--tokens 4000 -o " + p);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

std::string train_command(const std::string& flags) {
  return bin("kvc-train") + " -m " + test::model_dir("stories260K") + " --bases " + train_bases() + " -f " +
         kTrainData + " -c 64 -t 1 --alpha 4 --eval-every 0 --eval-windows 2 " + flags;
}

TEST(DistributedTrain, TwoRanksTrainTheGatesOfOneProcess) {
  const std::string dir = test::make_temp_dir("kvc-dist-train");
  for (const int batch : {2, 4}) {
    const std::string flags = "--steps 8 --batch " + std::to_string(batch) + " --dist-timeout 60 -o ";
    const std::string one = "one" + std::to_string(batch) + ".safetensors";
    const std::string two = "two" + std::to_string(batch) + ".safetensors";
    const test::CommandResult a = run_command("cd " + dir + " && " + train_command(flags + one));
    ASSERT_EQ(a.exit_code, 0) << a.err;
    const test::CommandResult b = run_ranks(train_command(flags + two), 2, free_port(), {"", ""}, dir);
    ASSERT_EQ(b.out, "0\n0\n") << b.err;
    // Batch 2: each rank's gradient is one window's, and their sum is the one process's exactly; batch 4
    // adds the same four gradients in another order, which moves the gates by rounding only.
    EXPECT_LE(max_difference(dir + "/" + one, dir + "/" + two), batch == 2 ? 0.0 : 1e-5) << "batch " << batch;
  }
  EXPECT_NE(test::slurp(dir + "/out0.txt").find("wrote two4.safetensors after 8 steps"), std::string::npos);
  EXPECT_EQ(test::slurp(dir + "/out1.txt"), "");
}

// Waits (in the shell) until `file` exists, at most 60 s.
std::string wait_for_file(const std::string& file) {
  return "for i in $(seq 1 6000); do [ -s " + file + " ] && break; sleep 0.01; done";
}

TEST(DistributedTrain, CtrlCOnOneRankStopsBothWithACheckpointThatResumesToTheSameGates) {
  const std::string dir = test::make_temp_dir("kvc-dist-train-int");
  // Enough steps that the signal, sent once the first checkpoint is there, comes well before the end.
  const std::string steps = "--steps 150 --batch 2 ";
  const std::string flags = steps + "--checkpoint-every 1 --checkpoint t.ckpt --dist-timeout 60 -o ";
  const test::CommandResult a = run_command("cd " + dir + " && " + train_command(steps + "-o one.safetensors"));
  ASSERT_EQ(a.exit_code, 0) << a.err;
  const test::CommandResult stopped = run_ranks(train_command(flags + "two.safetensors"), 2, free_port(), {"", ""}, dir,
                                                wait_for_file("t.ckpt") + "; kill -INT $p1");
  ASSERT_EQ(stopped.out, "130\n130\n") << stopped.err;  // both ranks report the interrupt
  const std::string said = test::slurp(dir + "/out0.txt");
  ASSERT_NE(said.find("stopped at step"), std::string::npos) << said;
  EXPECT_FALSE(std::ifstream(dir + "/two.safetensors").good());
  const test::CommandResult resumed =
      run_ranks(train_command(flags + "two.safetensors --resume"), 2, free_port(), {"", ""}, dir);
  ASSERT_EQ(resumed.out, "0\n0\n") << resumed.err;
  EXPECT_LE(max_difference(dir + "/one.safetensors", dir + "/two.safetensors"), 0.0);
}

TEST(DistributedTrain, AKilledRankEndsTheOtherInOneLineNamingTheCheckpoint) {
  const std::string dir = test::make_temp_dir("kvc-dist-train-kill");
  const auto start = std::chrono::steady_clock::now();
  const test::CommandResult r = run_ranks(
      train_command("--steps 100000 --batch 2 --checkpoint-every 1 --checkpoint t.ckpt --dist-timeout 15 -o g.st"), 2,
      free_port(), {"", ""}, dir, wait_for_file("t.ckpt") + "; kill -KILL $p1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.out, "1\n137\n") << r.err;
  // The progress bar may come first; the error is one line, the last.
  std::string err0 = test::slurp(dir + "/err0.txt");
  ASSERT_FALSE(err0.empty());
  EXPECT_EQ(err0.back(), '\n');
  err0 = err0.substr(err0.rfind('\n', err0.size() - 2) + 1);
  EXPECT_NE(err0.find("kvc-train: error: rank 0 of 2: "), std::string::npos) << err0;
  EXPECT_NE(err0.find("checkpoint 't.ckpt' (step "), std::string::npos) << err0;
  EXPECT_NE(err0.find(") is intact: start every rank again with --resume"), std::string::npos) << err0;
  EXPECT_LT(seconds, 50.0);
}

TEST(DistributedTrain, ImpossibleSplitsAndMismatchedRanksAreOneLine) {
  const std::string dir = test::make_temp_dir("kvc-dist-train-bad");
  test::expect_clean_error(
      run_command("cd " + dir + " && WORLD_SIZE=3 RANK=0 " + train_command("--steps 2 --batch 2 -o g.st")),
      "--batch 2 over 3 ranks: each rank runs whole windows, so --batch must be at least the number of ranks");
  const test::CommandResult r = run_ranks(train_command("--steps 2 --batch 2 --dist-timeout 60 -o g.st"), 2,
                                          free_port(), {"--lr 0.01", "--lr 0.02"}, dir);
  EXPECT_EQ(r.out, "1\n1\n") << r.err;
  EXPECT_NE(r.err.find("the ranks were started with different training flags (or models)"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir + "/g.st").good());
}

const std::string kSweep = " sweep -m " + test::model_dir("stories260K") +
                           " --methods none,snapkv,h2o --ratios 0.5,0.9 --tasks kl,ppl -f " +
                           test::data_file("wikitext2/wiki.test.raw") + " -c 64 --max-windows 2 -t 1 ";

TEST(DistributedSweep, ShardsMergedGiveTheUnshardedTable) {
  const std::string dir = test::make_temp_dir("kvc-dist-sweep");
  const test::CommandResult one = run_command(bin("kvc-eval") + kSweep + "--out-dir " + dir + "/one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  // One shard as an independent process (a shell loop), one as a torchrun rank and one as a Slurm array task
  // would be (--shard auto).
  const std::string out = " --out-dir " + dir + "/three";
  const test::CommandResult s0 = run_command(bin("kvc-eval") + kSweep + out + " --shard 0/3");
  const test::CommandResult s2 = run_command("RANK=2 WORLD_SIZE=3 " + bin("kvc-eval") + kSweep + out + " --shard auto");
  ASSERT_EQ(s0.exit_code, 0) << s0.err;
  ASSERT_EQ(s2.exit_code, 0) << s2.err;
  EXPECT_NE(s0.out.find("kvc-eval merge --out-dir"), std::string::npos) << s0.out;
  // Shard 1 has not run: the merge names it and stops, unless partial results are asked for.
  test::expect_clean_error(run_command(bin("kvc-eval") + " merge" + out),
                           "shard 1 of 3: not started); run those shards again with the same flags");
  const test::CommandResult partial = run_command(bin("kvc-eval") + " merge --allow-partial --json" + out);
  ASSERT_EQ(partial.exit_code, 0) << partial.err;
  EXPECT_NE(partial.out.find("\"complete\":false"), std::string::npos) << partial.out;
  const test::CommandResult s1 = run_command(
      "env -u RANK -u WORLD_SIZE -u SLURM_NTASKS SLURM_ARRAY_TASK_ID=6 "
      "SLURM_ARRAY_TASK_MIN=5 SLURM_ARRAY_TASK_COUNT=3 " +
      bin("kvc-eval") + kSweep + out + " --shard auto");
  ASSERT_EQ(s1.exit_code, 0) << s1.err;
  const test::CommandResult merged = run_command(bin("kvc-eval") + " merge" + out);
  ASSERT_EQ(merged.exit_code, 0) << merged.err;
  EXPECT_EQ(test::slurp(dir + "/three/results.md"), test::slurp(dir + "/one/results.md"));
  EXPECT_NE(merged.out.find("merge: 3 shards, 10 of 10 cells;"), std::string::npos) << merged.out;
  // The merged file lists the cells in the order one process ran them, so an unsharded re-run resumes from it.
  const auto keys = [](const std::string& jsonl) {
    std::vector<std::string> out;
    for (size_t p = jsonl.find("\"cell\":\""); p != std::string::npos; p = jsonl.find("\"cell\":\"", p + 1))
      out.push_back(jsonl.substr(p + 8, jsonl.find('"', p + 8) - p - 8));
    return out;
  };
  EXPECT_EQ(keys(test::slurp(dir + "/three/results.jsonl")), keys(test::slurp(dir + "/one/results.jsonl")));
  const test::CommandResult rerun = run_command(bin("kvc-eval") + kSweep + out + " --json");
  EXPECT_NE(rerun.out.find("\"ran\":0"), std::string::npos) << rerun.out << rerun.err;
}

TEST(DistributedSweep, BadShardsAndMixedSweepsAreOneLine) {
  const std::string dir = test::make_temp_dir("kvc-dist-sweep-bad");
  for (const std::string bad : {"2/2", "1", "a/b", "0/0", "1/2/3"}) {
    test::expect_clean_error(run_command(bin("kvc-eval") + kSweep + "--out-dir " + dir + "/x --shard " + bad),
                             "--shard '" + bad + "': expected I/N with 0 <= I < N");
  }
  test::expect_clean_error(run_command("env -u RANK -u WORLD_SIZE -u SLURM_NTASKS " + bin("kvc-eval") + kSweep +
                                       "--out-dir " + dir + "/x --shard auto"),
                           "--shard auto: no launcher environment");
  test::expect_clean_error(
      run_command("RANK=0 WORLD_SIZE=1 " + bin("kvc-eval") + kSweep + "--out-dir " + dir + "/x --shard auto"),
      "--shard auto: the launcher started one process (torchrun), so there is nothing to share");
  test::expect_clean_error(run_command("env -u RANK -u WORLD_SIZE -u SLURM_NTASKS SLURM_ARRAY_TASK_ID=12 "
                                       "SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_COUNT=4 " +
                                       bin("kvc-eval") + kSweep + "--out-dir " + dir + "/x --shard auto"),
                           "the Slurm array's task IDs are not 0..N-1 from SLURM_ARRAY_TASK_MIN (ID 12, MIN 0");
  test::expect_clean_error(run_command(bin("kvc-eval") + " merge --out-dir " + dir), "has no shard-I-of-N.json files");
  // Shards of two different sweeps in one folder.
  ASSERT_EQ(run_command(bin("kvc-eval") + kSweep + "--out-dir " + dir + "/mixed --shard 0/2 --max-cells 1").exit_code,
            0);
  std::string other_sweep = kSweep;
  other_sweep.replace(other_sweep.find("--max-windows 2"), 15, "--max-windows 1");
  const test::CommandResult other =
      run_command(bin("kvc-eval") + other_sweep + "--out-dir " + dir + "/mixed --shard 1/2 --max-cells 1");
  ASSERT_EQ(other.exit_code, 0) << other.err;
  test::expect_clean_error(run_command(bin("kvc-eval") + " merge --out-dir " + dir + "/mixed"),
                           "every shard must be started with the same flags");
}

// scripts/ranks.sh, the local launcher the README and --help use: a rank that fails stops the rank that
// would otherwise wait for it until --dist-timeout, and the failing rank's status is the launcher's.
TEST(LocalLauncher, AFailingRankStopsTheOthersAndItsStatusIsReturned) {
  const std::string dir = test::make_temp_dir("kvc-dist-launcher");
  const std::string launcher = std::string(KVC_SOURCE_DIR) + "/scripts/ranks.sh";
  const auto start = std::chrono::steady_clock::now();
  const test::CommandResult r =
      run_command("cd " + dir + " && MASTER_PORT=" + std::to_string(free_port()) + " " + launcher +
                  " 2 bash -c '[ $RANK = 1 ] && exit 3; exec " + bin("kvc-calibrate") + kCalibrate +
                  "--tokens 2000 --dist-timeout 60 -o x.safetensors'");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_NE(r.err.find("rank 1 exited with status 3; stopping the other ranks"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 30.0);
  EXPECT_FALSE(std::ifstream(dir + "/x.safetensors").good());
  // Every rank succeeding: status 0 and rank 0's file.
  const test::CommandResult ok =
      run_command("cd " + dir + " && MASTER_PORT=" + std::to_string(free_port()) + " " + launcher + " 2 " +
                  bin("kvc-calibrate") + kCalibrate + "--tokens 2000 -o y.safetensors");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_TRUE(std::ifstream(dir + "/y.safetensors").good());
}

}  // namespace
}  // namespace kvc
