// The output writer as a shell user relies on it: "-" is stdout, pipes and devices are written through,
// symlinks are followed and stay links, regular files are replaced atomically, and every failure is one
// line naming the user's path with nothing half-written left behind.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/expect_error.h"
#include "util/error.h"
#include "util/files.h"
#include "util/staged_folder.h"

namespace fs = std::filesystem;

namespace kvc {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using kvc::test::expect_error;

class FileWritersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "kvc_out_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }

  // Everything in a folder, hidden files (where a temporary file would be) included.
  static std::vector<std::string> listing(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string dir_;
};

TEST_F(FileWritersTest, DashWritesToStandardOutput) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(stdout);
  const int saved_stdout = ::dup(STDOUT_FILENO);
  ASSERT_GE(::dup2(fds[1], STDOUT_FILENO), 0);
  ::close(fds[1]);
  write_file_atomic("-", "to stdout\n");
  ::dup2(saved_stdout, STDOUT_FILENO);  // also closes the pipe's last write end
  ::close(saved_stdout);
  char buffer[64];
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), "to stdout\n");
  EXPECT_TRUE(listing(dir_).empty());
}

TEST_F(FileWritersTest, DevStdoutReachesAPipe) {
  // /dev/stdout -> /proc/self/fd/1 -> "pipe:[N]": only the kernel's lookup resolves the last hop.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::fflush(stdout);
  const int saved_stdout = ::dup(STDOUT_FILENO);
  ASSERT_GE(::dup2(fds[1], STDOUT_FILENO), 0);
  ::close(fds[1]);
  write_file_atomic("/dev/stdout", "through /dev/stdout\n");
  ::dup2(saved_stdout, STDOUT_FILENO);
  ::close(saved_stdout);
  char buffer[64];
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  EXPECT_EQ(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0), "through /dev/stdout\n");
}

TEST_F(FileWritersTest, FifoIsWrittenThroughAndStaysAFifo) {
  const std::string fifo = path("pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::string received;
  std::thread reader([&] { received = slurp(fifo); });
  write_file_atomic(fifo, "through the pipe\n");
  reader.join();
  EXPECT_EQ(received, "through the pipe\n");
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"pipe"});
}

TEST_F(FileWritersTest, DevNullIsWrittenThroughAndStaysADevice) {
  write_file_atomic("/dev/null", "discarded");
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
}

TEST_F(FileWritersTest, SymlinkStaysALinkAndItsTargetIsReplaced) {
  write_file_atomic(path("target.json"), "old");
  fs::create_symlink("target.json", path("link.json"));
  write_file_atomic(path("link.json"), "new");
  EXPECT_TRUE(fs::is_symlink(path("link.json")));
  EXPECT_EQ(fs::read_symlink(path("link.json")), "target.json");
  EXPECT_EQ(slurp(path("target.json")), "new");
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"link.json", "target.json"}));
}

TEST_F(FileWritersTest, SymlinkIntoAnotherFolderReplacesTheTargetThere) {
  fs::create_directory(path("real"));
  fs::create_directory(path("links"));
  write_file_atomic(path("real/out.txt"), "old");
  fs::create_symlink("../real/out.txt", path("links/out.txt"));
  write_file_atomic(path("links/out.txt"), "new");
  EXPECT_EQ(slurp(path("real/out.txt")), "new");
  EXPECT_TRUE(fs::is_symlink(path("links/out.txt")));
  EXPECT_EQ(listing(path("real")), std::vector<std::string>{"out.txt"});
  EXPECT_EQ(listing(path("links")), std::vector<std::string>{"out.txt"});
}

TEST_F(FileWritersTest, DanglingSymlinkCreatesItsTarget) {
  fs::create_symlink("made.txt", path("link.txt"));
  write_file_atomic(path("link.txt"), "created");
  EXPECT_TRUE(fs::is_symlink(path("link.txt")));
  EXPECT_EQ(slurp(path("made.txt")), "created");
}

TEST_F(FileWritersTest, RegularFileIsReplacedKeepingItsPermissions) {
  write_file_atomic(path("out.txt"), "first");
  ::chmod(path("out.txt").c_str(), 0640);
  write_file_atomic(path("out.txt"), "second");
  EXPECT_EQ(slurp(path("out.txt")), "second");
  struct stat st {};
  ASSERT_EQ(::stat(path("out.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.txt"});
}

TEST_F(FileWritersTest, UncommittedOutputLeavesTheOldFileAndNoTemporary) {
  write_file_atomic(path("out.txt"), "kept");
  {
    OutputFile out(path("out.txt"));
    out.write("half of a new");
  }
  EXPECT_EQ(slurp(path("out.txt")), "kept");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.txt"});
}

TEST_F(FileWritersTest, FullDeviceIsOneLineNamingThePath) {
  expect_error([] { write_file_atomic("/dev/full", std::string(1 << 16, 'x')); },
               "cannot write '/dev/full': No space left on device");
}

TEST_F(FileWritersTest, WriteErrorOnARegularFileRemovesTheTemporaryAndKeepsTheOldFile) {
  // A file size limit makes the kernel fail the write (EFBIG) as a full disk would (ENOSPC), without
  // needing a full disk; it is set in a child so this process keeps its own limit.
  write_file_atomic(path("out.bin"), "old");
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{4096, 4096};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string message = "no error";
    try {
      write_file_atomic(path("out.bin"), std::string(1 << 20, 'x'));
    } catch (const kvc::Error& e) {
      message = e.what();
    }
    (void)!::write(fds[1], message.data(), message.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  char buffer[512];
  const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  const std::string message(buffer, n > 0 ? static_cast<size_t>(n) : 0);
  EXPECT_EQ(message, "cannot write '" + path("out.bin") + "': File too large");
  EXPECT_EQ(slurp(path("out.bin")), "old");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.bin"});
}

TEST_F(FileWritersTest, FullFilesystemRemovesTheTemporary) {
  // Needs a mount (root with CAP_SYS_ADMIN); elsewhere the size-limit test above covers the same path.
  const std::string small = path("small");
  fs::create_directory(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=64k") != 0) GTEST_SKIP() << "cannot mount a tmpfs here";
  std::string message;
  try {
    write_file_atomic(small + "/out.bin", std::string(1 << 20, 'x'));
  } catch (const kvc::Error& e) {
    message = e.what();
  }
  const std::vector<std::string> left = listing(small);
  ::umount(small.c_str());
  EXPECT_EQ(message, "cannot write '" + small + "/out.bin': No space left on device");
  EXPECT_TRUE(left.empty());
}

TEST_F(FileWritersTest, MissingFolderNamesTheUsersPath) {
  const std::string wanted = path("no/such/stats.json");
  expect_error([&] { write_file_atomic(wanted, "{}"); },
               "cannot write '" + wanted + "': folder '" + path("no/such") + "' does not exist");
  expect_error([&] { check_writable_output(wanted); }, "cannot write '" + wanted + "'");
}

TEST_F(FileWritersTest, FolderAsOutputFileIsAnError) {
  expect_error([&] { write_file_atomic(dir_, "{}"); }, "cannot write '" + dir_ + "': it is a folder");
  expect_error([&] { check_writable_output(dir_); }, "it is a folder");
}

TEST_F(FileWritersTest, CheckWritableOutputAcceptsWhatAWriteWouldAccept) {
  check_writable_output("-");
  check_writable_output("/dev/null");
  check_writable_output(path("new.json"));
  fs::create_symlink("made.json", path("link.json"));
  check_writable_output(path("link.json"));
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"link.json"});  // checking creates nothing
  expect_error([] { check_writable_output(""); }, "empty");
}

TEST_F(FileWritersTest, CheckWritableOutputFolder) {
  check_writable_output_folder(dir_);
  check_writable_output_folder(path("to-be-made"));
  check_writable_output_folder(path("a/b"));  // missing parents are created too
  EXPECT_TRUE(listing(dir_).empty());         // checking creates nothing
  write_file_atomic(path("file"), "x");
  expect_error([&] { check_writable_output_folder(path("file")); }, "it is not a folder");
  expect_error([&] { check_writable_output_folder(path("file/sub")); },
               "cannot create '" + path("file/sub") + "': '" + path("file") + "' is not a folder");
}

// Files staged together appear together on commit, replacing an earlier run's; nothing appears, and a
// folder this run made is gone again, when the run ends without commit.
TEST_F(FileWritersTest, StagedFolderCommitsAllOrNothing) {
  write_file_atomic(path("profile.csv"), "old");
  {
    StagedFolder out(dir_);
    write_file_atomic(out.path("profile.csv"), "new");
    write_file_atomic(out.path("plot.gp"), "plot");
    EXPECT_EQ(slurp(path("profile.csv")), "old");  // nothing moves before commit
    out.commit();
  }
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"plot.gp", "profile.csv"}));
  EXPECT_EQ(slurp(path("profile.csv")), "new");
  {
    StagedFolder out(dir_);
    write_file_atomic(out.path("profile.csv"), "abandoned");
  }
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"plot.gp", "profile.csv"}));
  EXPECT_EQ(slurp(path("profile.csv")), "new");
  {
    StagedFolder out(path("made/here"));
    write_file_atomic(out.path("x"), "x");
  }
  EXPECT_TRUE(fs::exists(path("made")));  // the parent it made on the way stays (it may be the user's now)
  EXPECT_FALSE(fs::exists(path("made/here")));
}

// A name taken by something other than a regular file stops the commit before any file moves.
TEST_F(FileWritersTest, StagedFolderNeverReplacesAFolderOrADevice) {
  fs::create_directory(path("profile.csv"));
  StagedFolder out(dir_);
  write_file_atomic(out.path("a.txt"), "a");
  write_file_atomic(out.path("profile.csv"), "new");
  expect_error([&] { out.commit(); }, "it exists and is not a regular file");
  EXPECT_FALSE(fs::exists(path("a.txt")));
  EXPECT_TRUE(fs::is_directory(path("profile.csv")));
}

// The staging folder of a killed run is removed by the next run into the same folder; a live one stays.
TEST_F(FileWritersTest, StagedFolderOfADeadRunIsRemovedByTheNext) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = path(".staging." + std::to_string(dead) + ".0");
  const std::string live = path(".staging.1.0");  // init's: alive, not ours to remove
  fs::create_directory(stale);
  write_file_atomic(stale + "/profile.csv", "partial");
  fs::create_directory(live);
  {
    StagedFolder out(dir_);
    out.commit();
  }
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
}

}  // namespace
}  // namespace kvc
