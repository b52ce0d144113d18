// kvc-calibrate over two ranks on one machine (c10d over 127.0.0.1): the bases equal one process's, and
// a rank that never comes, ranks started with different flags, and a port already taken each end in a
// one-line error within the stated timeout.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

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
                               test::data_file("tinystories/tinystories_excerpt_30k.txt") +
                               " --ctx-size 128 -t 1 ";

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

// `world` ranks of kvc-calibrate in the background (rank r with `extra[r]`), waited for together; the
// exit codes and stderr of every rank are collected.
test::CommandResult run_ranks(int world, int port, const std::vector<std::string>& extra, const std::string& dir) {
  std::string cmd = "cd " + dir + " || exit 9; ";
  for (int r = 0; r < world; ++r) {
    cmd += "(MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " WORLD_SIZE=" + std::to_string(world) +
           " RANK=" + std::to_string(r) + " " + bin("kvc-calibrate") + kCalibrate + extra[static_cast<size_t>(r)] +
           " > out" + std::to_string(r) + ".txt 2> err" + std::to_string(r) + ".txt; echo $? > rc" +
           std::to_string(r) + ".txt) & ";
  }
  cmd += "wait; for r in $(seq 0 " + std::to_string(world - 1) + "); do cat rc$r.txt; cat err$r.txt >&2; done";
  return run_command(cmd);
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
  const test::CommandResult one = run_command(bin("kvc-calibrate") + kCalibrate + "--tokens 6000 -o " + dir + "/one.safetensors");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const test::CommandResult two = run_ranks(2, free_port(), {"--tokens 6000 --dist-timeout 30 -o two.safetensors", "--tokens 6000 --dist-timeout 30 -o two.safetensors"}, dir);
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

TEST(DistributedCalibrate, AMissingRankEndsInOneLineWithinTheTimeout) {
  const std::string dir = test::make_temp_dir("kvc-dist-missing");
  const auto start = std::chrono::steady_clock::now();
  const test::CommandResult r = run_ranks(1, free_port(), {"--tokens 2000 --dist-timeout 3 -o x.safetensors"}, dir);
  // A world of 2 announced, one rank started.
  const test::CommandResult lone = run_command("cd " + dir + " && MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                               std::to_string(free_port()) + " WORLD_SIZE=2 RANK=0 " +
                                               bin("kvc-calibrate") + kCalibrate + "--tokens 2000 --dist-timeout 3 -o x.safetensors");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.out, "0\n") << r.err;  // a world of one needs nobody
  test::expect_clean_error(lone, "the ranks did not all join at 127.0.0.1:");
  EXPECT_LT(seconds, 20.0);
  EXPECT_FALSE(std::ifstream(dir + "/x.safetensors.tmp").good());
}

TEST(DistributedCalibrate, RanksWithDifferentFlagsStopInOneLine) {
  const std::string dir = test::make_temp_dir("kvc-dist-flags");
  const test::CommandResult r =
      run_ranks(2, free_port(), {"--tokens 2000 --dist-timeout 30 -o y.safetensors", "--tokens 3000 --dist-timeout 30 -o y.safetensors"}, dir);
  EXPECT_EQ(r.out, "1\n1\n") << r.err;
  EXPECT_NE(r.err.find("the ranks were started with different --tokens or --ctx-size"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("terminate called"), std::string::npos) << r.err;
  EXPECT_FALSE(std::ifstream(dir + "/y.safetensors").good());
}

TEST(DistributedCalibrate, APortInUseIsNamed) {
  const HeldPort held;
  const test::CommandResult r = run_command("MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(held.port) +
                                            " WORLD_SIZE=2 RANK=0 " + bin("kvc-calibrate") + kCalibrate +
                                            "--tokens 2000 --dist-timeout 3 -o /tmp/kvc-never.safetensors");
  test::expect_clean_error(r, "the port is in use; choose another MASTER_PORT");
}

TEST(DistributedCalibrate, MalformedEnvironmentAndBackendAreOneLine) {
  test::expect_clean_error(run_command("WORLD_SIZE=2 RANK=2 " + bin("kvc-calibrate") + kCalibrate + "-o /tmp/z.st"),
                           "environment variable RANK='2': expected an integer in 0..1");
  test::expect_clean_error(run_command(bin("kvc-calibrate") + kCalibrate + "--dist-backend nccl -o /tmp/z.st"),
                           "--dist-backend nccl: this build's LibTorch has no NCCL");
}

}  // namespace
}  // namespace kvc
