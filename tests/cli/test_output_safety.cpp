// A user's files are never destroyed and no string becomes a command: the commands that once
// overwrote a model, a bases file or a device node, or ran a shell or gnuplot command built from a
// folder name or a label, now end in one line naming the problem, with every input as it was.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "support/cli_expectations.h"
#include "support/paths.h"
#include "support/run_command.h"
#include "util/subprocess.h"

namespace kvc {
namespace {

namespace fs = std::filesystem;
using test::bin;
using test::expect_clean_error;
using test::run_command;
using test::slurp;

// A private copy of the tiny model, so that a regression cannot damage the repository's.
std::string copy_of_model(const std::string& dir) {
  const std::string model = dir + "/m";
  fs::copy(test::model_dir("stories260K"), model, fs::copy_options::recursive);
  return model;
}

std::string shell_word(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Some tools print their summary line before the write that fails: the error is the last line.
void expect_error_at_end(const test::CommandResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.err;
  EXPECT_LT(r.exit_code, 128) << "killed by a signal: " << r.err;
  const std::string trimmed = r.err.substr(0, r.err.find_last_not_of('\n') + 1);
  const std::string last = trimmed.substr(trimmed.rfind('\n') == std::string::npos ? 0 : trimmed.rfind('\n') + 1);
  EXPECT_NE(last.find(": error: "), std::string::npos) << r.err;
  EXPECT_NE(last.find(needle), std::string::npos) << "expected '" << needle << "' in: " << last;
}

class OutputSafety : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::make_temp_dir("kvc-output-safety");
    model_ = copy_of_model(dir_);
    weights_ = slurp(model_ + "/model.safetensors");
    config_ = slurp(model_ + "/config.json");
  }
  void expect_model_intact() {
    EXPECT_EQ(slurp(model_ + "/model.safetensors"), weights_) << "the model's weights changed";
    EXPECT_EQ(slurp(model_ + "/config.json"), config_) << "the model's config.json changed";
    for (const auto& entry : fs::directory_iterator(model_))
      EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos) << "left behind: " << entry.path();
  }
  std::string text() const { return test::data_file("tinystories/tinystories_excerpt_30k.txt"); }
  std::string dir_, model_, weights_, config_;
};

TEST_F(OutputSafety, AnOutputOnTheModelIsRefusedBeforeAnyWork) {
  expect_clean_error(
      run_command(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 --json-out " + model_ + "/config.json"),
      "refusing to write");
  expect_clean_error(run_command(bin("kvc-calibrate") + " -m " + model_ + " -f " + text() + " --tokens 64 -o " +
                                 model_ + "/model.safetensors"),
                     "refusing to write");
  expect_clean_error(run_command(bin("kvc-cluster") + " build -m " + model_ + " -p 'Once upon a time' --store " + dir_ +
                                 "/s.kvs --index " + model_ + "/model.safetensors"),
                     "refusing to write");
  // Through a symbolic link, the same file.
  fs::create_symlink(model_ + "/model.safetensors", dir_ + "/link.safetensors");
  expect_clean_error(run_command(bin("kvc-calibrate") + " -m " + model_ + " -f " + text() + " --tokens 64 -o " + dir_ +
                                 "/link.safetensors"),
                     "same file");
  // A retrieval store on the weights the run has mapped used to truncate them under the mapping (SIGBUS).
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 --retrieval adaptive " +
                                 "--retrieval-store " + model_ + "/model.safetensors"),
                     "refusing to write");
  expect_model_intact();
}

TEST_F(OutputSafety, AnOutputOnAnotherInputOrOutputIsRefused) {
  const std::string bases = dir_ + "/b.safetensors";
  test::write_bytes(bases, "not really bases, but a user's file");
  expect_clean_error(
      run_command(bin("kvc-train") + " -m " + model_ + " -f " + text() + " --bases " + bases + " -o " + bases),
      "refusing to write");
  EXPECT_EQ(slurp(bases), "not really bases, but a user's file");
  expect_clean_error(run_command(bin("kvc-train") + " -m " + model_ + " -f " + text() + " --bases " + bases +
                                 " --checkpoint " + dir_ + "/g -o " + dir_ + "/g"),
                     "twice");
  // --store X --index X: refused before X is touched.
  const std::string x = dir_ + "/x";
  test::write_bytes(x, "keep me");
  expect_clean_error(
      run_command(bin("kvc-cluster") + " build -m " + model_ + " -p 'Once upon a time' --store " + x + " --index " + x),
      "twice");
  EXPECT_EQ(slurp(x), "keep me");
  // An input text as the output.
  const std::string copy = dir_ + "/text.txt";
  fs::copy_file(text(), copy);
  const std::string before = slurp(copy);
  expect_clean_error(run_command(bin("kvc-calibrate") + " -m " + model_ + " -f " + copy + " --tokens 64 -o " + copy),
                     "refusing to write");
  EXPECT_EQ(slurp(copy), before);
  expect_model_intact();
}

TEST_F(OutputSafety, ADeviceIsNeverRemovedOrReplaced) {
  expect_clean_error(run_command(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 --retrieval adaptive " +
                                 "--retrieval-store /dev/full"),
                     "not a regular file");
  expect_clean_error(run_command(bin("kvc-cluster") + " build -m " + model_ +
                                 " -p 'Once upon a time' --store /dev/full " + "--index " + dir_ + "/i.safetensors"),
                     "not a regular file");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/full", &st), 0) << "/dev/full was removed";
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/full is no longer a device";
  // Written through, a full device is an error, not exit 0.
  expect_error_at_end(run_command(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 -q --json-out /dev/full"),
                      "/dev/full");
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST_F(OutputSafety, StandardOutputOnAFullDiskIsAnError) {
  // In a subshell: run_command redirects the command's own standard output after it.
  const auto to_full_disk = [](const std::string& command) { return run_command("(" + command + " > /dev/full)"); };
  expect_error_at_end(to_full_disk(bin("kvc-tokenize") + " -m " + model_ + " -p 'Once upon a time'"),
                      "standard output");
  expect_error_at_end(to_full_disk(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 -q --json"),
                      "standard output");
  expect_error_at_end(
      to_full_disk(bin("kvc-eval") + " ppl -m " + model_ + " -f " + text() + " -c 64 --max-windows 1 --json"),
      "standard output");
}

TEST_F(OutputSafety, AFifoAsTheModelIsRefusedWithoutWaiting) {
  const std::string fifo = dir_ + "/model.gguf";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // `timeout` turns a hang into exit 124, which expect_clean_error reports.
  expect_clean_error(run_command("timeout 20 " + bin("kvc-generate") + " -m " + fifo + " -p Once -n 2"),
                     "not a regular file");
}

TEST_F(OutputSafety, AFolderNameOrALabelNeverBecomesACommand) {
  // The folder and label are passed to no shell and written into gnuplot scripts as string literals.
  const std::string out = dir_ + "/x'; touch " + dir_ + "/PWNED; echo '";
  const std::string replay =
      bin("kvc-cluster") + " replay -m " + model_ + " -p 'Once upon a time there was a girl' -n 4 ";
  auto r = run_command("cd " + shell_word(dir_) + " && " + replay + "-s adaptive --out-dir " + shell_word(out));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/PWNED")) << "a shell ran the folder name";
  EXPECT_TRUE(fs::is_directory(out)) << "the folder is made with the name as given";
  r = run_command("cd " + shell_word(dir_) + " && " + replay + shell_word("-s") + " " +
                  shell_word("adaptive:label=a\"; system(\"touch P2\"); b=\"") + " -s " +
                  shell_word("static:label=it's") + " --plot --out-dir " + shell_word(dir_ + "/bob's run"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/P2")) << "gnuplot ran a label";
  EXPECT_FALSE(fs::exists(dir_ + "/bob's run/P2")) << "gnuplot ran a label";
  EXPECT_TRUE(fs::is_directory(dir_ + "/bob's run"));
  if (program_on_path("gnuplot")) EXPECT_TRUE(fs::exists(dir_ + "/bob's run/recall.png")) << r.err;
  r = run_command("cd " + shell_word(dir_) + " && " + bin("kvc-profile") + " -m " + model_ + " -f " + text() +
                  " -c 64 --windows 1 --out-dir " + shell_word(dir_ + "/p'; touch PWNED3; echo '"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir_ + "/PWNED3")) << "a shell ran the folder name";
}

TEST_F(OutputSafety, ATemporaryFileOfADeadRunIsRemovedByTheNextWrite) {
  // A run killed (kill -9) between writing its temporary file and renaming it leaves the file.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = dir_ + "/.out.json.tmp." + std::to_string(dead) + ".0";
  const std::string alive = dir_ + "/.out.json.tmp." + std::to_string(::getpid()) + ".0";
  test::write_bytes(stale, "{");
  test::write_bytes(alive, "{");  // a live process's file is not ours to remove
  const auto r = run_command(bin("kvc-generate") + " -m " + model_ + " -p Once -n 2 --json-out " + dir_ + "/out.json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(stale)) << "the dead run's temporary file is still there";
  EXPECT_TRUE(fs::exists(alive));
  EXPECT_TRUE(fs::exists(dir_ + "/out.json"));
}

// Values out of range are named as such, not taken for another mistake; a FIFO in a store's place is
// refused instead of blocking verify.
TEST_F(OutputSafety, BadValuesAreNamedAndAFifoStoreDoesNotBlock) {
  const std::string generate = bin("kvc-generate") + " -m " + model_ + " -p 'Once upon a time' -n 2 ";
  expect_clean_error(run_command(generate + "--press snapkv --ratio nan"), "--ratio must be in [0, 1), got nan");
  expect_clean_error(run_command(generate + "--press snapkv --ratio -0.1"), "--ratio must be in [0, 1), got -0.1");
  expect_clean_error(run_command(generate + "--press h2o --budget 0"), "0 keeps nothing");
  expect_clean_error(run_command(generate + "--press h2o --budget -5"), "-5 keeps nothing");
  expect_clean_error(run_command(generate + "--prompt-tokens 0"), "0 is not a positive count");
  expect_clean_error(run_command(bin("kvc-bench") + " -m " + model_ + " --contexts -1"), "-1 is not a positive count");
  test::CommandResult r0;
  // Beyond 64 bits: CLI11 would saturate to INT64_MAX and run; the value and the limit are named.
  expect_clean_error(run_command(generate + "-n 99999999999999999999"),
                     "99999999999999999999 is out of range (from -9223372036854775808 to 9223372036854775807)");
  expect_clean_error(run_command(generate + "--press h2o --budget 99999999999999999999"),
                     "--budget: 99999999999999999999 is out of range");
  expect_clean_error(run_command(bin("kvc-eval") + " needle -m " + model_ + " --haystack " + text() +
                                 " --lengths 64 --depths 0 --samples 1 --seed 99999999999999999999999"),
                     "is out of range (at most 18446744073709551615)");
  // A budget far past the model's context (512) reserves no more than the context: the run works in a
  // few hundred MB instead of asking for 12.8 GB.
#if defined(__SANITIZE_ADDRESS__)
  const std::string address_limit;  // ASan reserves terabytes of shadow address space: no ulimit -v there
#else
  const std::string address_limit = "ulimit -v 8000000 && ";
#endif
  r0 = run_command(address_limit + generate + "--press h2o --budget 100000000 --json");
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  const auto stats = nlohmann::json::parse(r0.out);
  // stories260K: 5 layers x 4 KV heads x (head_dim 8 x (K + V) x 4 bytes + an 8-byte position) per
  // entry, room for at most the context + 1 entries.
  EXPECT_LE(stats["kv_peak_resident_bytes"].get<int64_t>(), int64_t{5 * 4 * (8 * 2 * 4 + 8)} * 513);
  // A line break in a method's spec would split the CSV row or gnuplot line its label is written into.
  expect_clean_error(run_command(generate + "--press " + shell_word("h2o:agg=mean\n!touch P") + " --budget 4"),
                     "control characters");
  const std::string store = dir_ + "/s.kvs", index = dir_ + "/s.safetensors";
  auto r = run_command(bin("kvc-cluster") + " build -m " + model_ + " -p 'Once upon a time there was a girl' --store " +
                       store + " --index " + index);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ASSERT_EQ(::unlink(store.c_str()), 0);
  ASSERT_EQ(::mkfifo(store.c_str(), 0600), 0);
  expect_clean_error(run_command("timeout 20 " + bin("kvc-cluster") + " verify --index " + index),
                     "not a regular file");
}

// Ctrl-C: every tool stops at a safe point and exits 130, whatever it was doing; kvc-train writes its
// checkpoint but no -o file, so a pipeline chained with && stops too.
TEST_F(OutputSafety, CtrlCExits130) {
  const auto interrupted_status = [&](const std::string& command, const std::string& err) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::execl("/bin/sh", "sh", "-c", ("exec " + command + " >/dev/null 2>" + err).c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Once the tool is past loading (its first progress or output on stderr), interrupt it.
    for (int i = 0; i < 400 && test::slurp(err).empty(); ++i) ::usleep(25000);
    ::usleep(300000);
    ::kill(pid, SIGINT);
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };
  EXPECT_EQ(interrupted_status(bin("kvc-generate") + " -m " + model_ +
                                   " -p 'Once upon a time' --press h2o --budget 64 " + "-n 100000000 --ignore-eos",
                               dir_ + "/generate.err"),
            130)
      << slurp(dir_ + "/generate.err");
  const std::string bases = dir_ + "/bases.safetensors";
  auto r = run_command(bin("kvc-calibrate") + " -m " + model_ + " -f " + text() + " --tokens 512 -c 64 -o " + bases);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(interrupted_status(bin("kvc-train") + " -m " + model_ + " -f " + text() + " --bases " + bases +
                                   " --steps 1000000 -c 64 --checkpoint " + dir_ + "/g.ckpt -o " + dir_ +
                                   "/gates.safetensors",
                               dir_ + "/train.err"),
            130)
      << slurp(dir_ + "/train.err");
  EXPECT_FALSE(fs::exists(dir_ + "/gates.safetensors")) << "an interrupted training wrote its -o file";
  // kvc-bench stops between timed runs (here prefills) and writes no --json-out file.
  EXPECT_EQ(interrupted_status(bin("kvc-bench") + " -m " + model_ + " --contexts 256 --prefill-repeats 100000000 " +
                                   "--decode-tokens 1 -t 1 --json-out " + dir_ + "/bench.json",
                               dir_ + "/bench.err"),
            130)
      << slurp(dir_ + "/bench.err");
  EXPECT_FALSE(fs::exists(dir_ + "/bench.json")) << "an interrupted benchmark wrote its --json-out file";
  // kvc-eval ppl stops before the next window and says how many of the planned windows it scored.
  const std::string wiki = test::data_file("wikitext2/wiki.test.raw");
  EXPECT_EQ(
      interrupted_status(bin("kvc-eval") + " ppl -m " + model_ + " -f " + wiki + " -c 16 -t 1", dir_ + "/ppl.err"), 130)
      << slurp(dir_ + "/ppl.err");
  const std::string err = slurp(dir_ + "/ppl.err");
  long long scored = -1, planned = -1;
  const size_t at = err.find("interrupted: the figures cover the ");
  ASSERT_NE(at, std::string::npos) << err;
  ASSERT_EQ(std::sscanf(err.c_str() + at, "interrupted: the figures cover the %lld of %lld", &scored, &planned), 2);
  EXPECT_GT(scored, 0);
  EXPECT_LT(scored, planned);
}

}  // namespace
}  // namespace kvc
