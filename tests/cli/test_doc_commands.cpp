// Every command the README, docs/*.md, apps/*/README.md and the tools' --help examples tell a user to type runs here,
// with the exact flags, from a scratch folder laid out like the repository root (data/, recipes/, build/). Recipes see
// KVC_SMOKE=1 and run their own commands at small sizes; tools run as written.
#include <gtest/gtest.h>

#include <dirent.h>
#include <sys/stat.h>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/doc_commands.h"
#include "support/paths.h"
#include "support/run_command.h"

namespace kvc {
namespace {

const std::string kSource = KVC_SOURCE_DIR;
const std::string kBuild = std::string(KVC_BIN_DIR) + "/..";

// Commands the suite cannot run as a test of itself, with the reason.
struct Exclusion {
  std::string command, reason;
};
const std::vector<Exclusion> kExclusions = {
    {"bash scripts/setup.sh", "installs system packages; CI runs it right before this suite"},
    {"bash scripts/test.sh", "runs this very suite"},
};

bool excluded(const std::string& command) {
  for (const auto& e : kExclusions)
    if (e.command == command) return true;
  return false;
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A folder that looks like the repository root: shared inputs linked, outputs fresh.
std::string make_workspace(const std::string& name) {
  const std::string dir = test::make_temp_dir("kvc-doc-" + name);
  const std::string cmd = "mkdir -p " + dir + "/data/results && for d in models text reference tokenizers; do ln -s " +
                          shell_quote(kSource + "/data/") + "$d " + dir + "/data/$d; done && ln -s " +
                          shell_quote(kSource + "/recipes") + " " + dir + "/recipes && ln -s " +
                          shell_quote(kSource + "/scripts") + " " + dir + "/scripts && ln -s " + shell_quote(kBuild) +
                          " " + dir + "/build && if [ -d " + shell_quote(kSource + "/.venv-models") +
                          " ]; then ln -s " + shell_quote(kSource + "/.venv-models") + " " + dir + "/.venv-models; fi";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Runs the commands in order in one workspace (later commands may read what earlier ones wrote), each
// after `setup` (a shell prefix such as an export).
void run_in_workspace(const std::string& name, const std::vector<std::string>& commands,
                      const std::string& setup = "") {
  const std::string dir = make_workspace(name);
  for (const std::string& command : commands) {
    const std::string script = "cd " + shell_quote(dir) + " && export KVC_SMOKE=1 && " + setup +
                               "timeout 900 bash -o pipefail -c " + shell_quote(command) + " </dev/null";
    const auto r = test::run_command(script);
    const auto tail = [](const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; };
    ASSERT_EQ(r.exit_code, 0) << "command: " << command << "\n--- stderr:\n"
                              << tail(r.err) << "\n--- stdout:\n"
                              << tail(r.out);
  }
}

// The documentation whose shell blocks run here: the README, every docs/*.md and every apps/*/README.md.
struct DocFile {
  std::string path;    // relative to the repository root, e.g. "docs/lowrank.md"
  std::string prefix;  // its blocks' names start with it: "README", "lowrank", "kvc_eval_README"
};

std::string gtest_name(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return s;
}

std::vector<std::string> sorted_entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.push_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::vector<DocFile> doc_files() {
  std::vector<DocFile> files = {{"README.md", "README"}};
  for (const std::string& name : sorted_entries(kSource + "/docs"))
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".md") == 0)
      files.push_back({"docs/" + name, gtest_name(name.substr(0, name.size() - 3))});
  for (const std::string& app : sorted_entries(kSource + "/apps"))
    if (is_file(kSource + "/apps/" + app + "/README.md"))
      files.push_back({"apps/" + app + "/README.md", gtest_name(app) + "_README"});
  return files;
}

std::vector<test::DocBlock> blocks_of(const DocFile& file) {
  return test::markdown_shell_blocks(test::slurp(kSource + "/" + file.path), file.prefix);
}

// Every shell block of every documentation file, in order.
std::vector<test::DocBlock> all_blocks() {
  std::vector<test::DocBlock> blocks;
  for (const DocFile& f : doc_files())
    for (auto& b : blocks_of(f)) blocks.push_back(std::move(b));
  return blocks;
}

std::vector<test::DocBlock> without_exclusions(std::vector<test::DocBlock> blocks) {
  for (auto& b : blocks) {
    std::vector<std::string> kept;
    for (const auto& c : b.commands)
      if (!excluded(c)) kept.push_back(c);
    b.commands = kept;
  }
  return blocks;
}

std::vector<test::DocBlock> readme_blocks() { return without_exclusions(blocks_of(doc_files().front())); }

std::vector<test::DocBlock> docs_blocks() {
  std::vector<test::DocBlock> blocks;
  const auto files = doc_files();
  for (size_t i = 1; i < files.size(); ++i)
    for (auto& b : blocks_of(files[i])) blocks.push_back(std::move(b));
  return without_exclusions(blocks);
}

void run_block(const test::DocBlock& block) {
  if (block.commands.empty()) GTEST_SKIP() << "only excluded commands";
  run_in_workspace(block.name, block.commands);
}

class ReadmeBlock : public ::testing::TestWithParam<test::DocBlock> {};

TEST_P(ReadmeBlock, RunsAsWritten) { run_block(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Readme, ReadmeBlock, ::testing::ValuesIn(readme_blocks()),
                         [](const auto& info) { return info.param.name; });

// docs/*.md and apps/*/README.md: the same runner and exclusions, e.g. Docs/DocBlock.RunsAsWritten/lowrank_block_03.
class DocBlock : public ::testing::TestWithParam<test::DocBlock> {};

TEST_P(DocBlock, RunsAsWritten) { run_block(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Docs, DocBlock, ::testing::ValuesIn(docs_blocks()),
                         [](const auto& info) { return info.param.name; });

TEST(ReadmeCommands, ExclusionsAreStillInTheReadme) {
  // CI's .ci/run runs exactly these commands, so they must stay in the README itself.
  const auto blocks = blocks_of(doc_files().front());
  for (const auto& e : kExclusions) {
    bool found = false;
    for (const auto& b : blocks)
      for (const auto& c : b.commands) found = found || c == e.command;
    EXPECT_TRUE(found) << "stale exclusion: " << e.command;
  }
}

TEST(DocCommandParsing, BlockNamesAreUniqueValidTestNames) {
  std::set<std::string> names;
  for (const auto& b : all_blocks()) {
    EXPECT_TRUE(names.insert(b.name).second) << "two blocks named " << b.name;
    for (char c : b.name) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)) || c == '_') << b.name;
  }
  EXPECT_FALSE(names.empty());
}

TEST(DocCommands, EveryToolCommandIsInAShellBlock) {
  // Tool commands mentioned inline (`build/bin/kvc-...` in prose) escape the blocks' tests; keep each one in
  // a shell block of some documentation file.
  const auto blocks = all_blocks();
  for (const DocFile& f : doc_files()) {
    const std::string text = test::slurp(kSource + "/" + f.path);
    size_t pos = 0;
    while ((pos = text.find("`build/bin/kvc-", pos)) != std::string::npos) {
      const size_t end = text.find('`', pos + 1);
      if (end == std::string::npos) break;
      const std::string command = text.substr(pos + 1, end - pos - 1);
      pos = end;
      if (command.find(' ') == std::string::npos) continue;
      bool found = false;
      for (const auto& b : blocks)
        for (const auto& bc : b.commands) found = found || bc == command;
      EXPECT_TRUE(found) << f.path << ": inline command not in any shell block: " << command;
    }
  }
}

// Recipes the documentation names that no shell block runs, with the reason.
const std::vector<Exclusion> kRecipesNamedNotRun = {
    {"recipes/replot.sh", "re-renders the figures of an existing result folder; it needs one and gnuplot"},
    {"recipes/sweep_tiny_lm.sh", "every method on kvc-tiny-lm, which lives in the optional ../shared"},
};

TEST(DocCommands, EveryRecipeItNamesRunsInAShellBlock) {
  const auto blocks = all_blocks();
  const auto runs = [&](const std::string& recipe) {
    for (const auto& b : blocks)
      for (const auto& c : b.commands)
        if (c.find(recipe) != std::string::npos) return true;
    return false;
  };
  std::set<std::string> named;
  for (const DocFile& f : doc_files()) {
    const std::string text = test::slurp(kSource + "/" + f.path);
    size_t pos = 0;
    while ((pos = text.find("recipes/", pos)) != std::string::npos) {
      size_t end = pos + 8;
      while (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) ++end;
      const std::string recipe = text.substr(pos, end - pos) + ".sh";
      pos = end;
      if (text.compare(end, 3, ".sh") != 0) continue;
      named.insert(recipe);
      bool allowed = false;
      for (const auto& e : kRecipesNamedNotRun) allowed = allowed || e.command == recipe;
      if (!allowed) {
        EXPECT_TRUE(runs(recipe)) << f.path << " names " << recipe << " but no shell block runs it";
      }
    }
  }
  for (const auto& e : kRecipesNamedNotRun) {
    EXPECT_TRUE(named.count(e.command)) << "stale entry, no document names it: " << e.command;
    EXPECT_FALSE(runs(e.command)) << "stale entry, a shell block runs it: " << e.command;
  }
}

TEST(Docs, LinksResolve) {
  // Every relative Markdown link outside code blocks, [text](path) or ![alt](path), names a file or folder
  // that exists.
  for (const DocFile& f : doc_files()) {
    std::istringstream in(test::slurp(kSource + "/" + f.path));
    const std::string dir = kSource + "/" + f.path.substr(0, f.path.rfind('/') + 1);
    std::string line;
    bool in_code = false;
    while (std::getline(in, line)) {
      const size_t first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line.compare(first, 3, "```") == 0) in_code = !in_code;
      if (in_code) continue;
      size_t pos = 0;
      while ((pos = line.find("](", pos)) != std::string::npos) {
        const size_t end = line.find_first_of(") ", pos + 2);
        std::string target = line.substr(pos + 2, end == std::string::npos ? std::string::npos : end - pos - 2);
        pos += 2;
        if (target.empty() || target[0] == '#' || target.find("://") != std::string::npos ||
            target.rfind("mailto:", 0) == 0)
          continue;
        target = target.substr(0, target.find('#'));
        struct stat st {};
        EXPECT_EQ(::stat((dir + target).c_str(), &st), 0) << f.path << ": broken link " << target;
      }
    }
  }
}

const std::vector<std::string> kTools = {"kvc-generate", "kvc-eval",    "kvc-profile", "kvc-calibrate",
                                         "kvc-train",    "kvc-cluster", "kvc-bench",   "kvc-make-checkpoint",
                                         "kvc-tokenize"};

// The tool's examples and those of its subcommands, as --help prints them.
std::vector<std::string> tool_examples(const std::string& tool) {
  const auto help = test::run_command(test::bin(tool) + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> examples = test::help_examples(help.out);
  for (const std::string& sub : test::help_subcommands(help.out)) {
    const auto sub_help = test::run_command(test::bin(tool) + " " + sub + " --help");
    EXPECT_EQ(sub_help.exit_code, 0) << sub_help.err;
    for (const auto& e : test::help_examples(sub_help.out)) examples.push_back(e);
  }
  return examples;
}

// The tools as `cmake --install build --prefix P` lays them out; ctest's fixture
// Tools/install_for_help_examples installs them there before these tests run.
const std::string kInstalled = KVC_INSTALL_DIR;

class HelpExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(HelpExamples, RunAsPastedFromTheRepositoryRootAfterInstall) {
  const std::string tool = GetParam();
  if (!std::ifstream(test::bin(tool))) GTEST_SKIP() << tool << " is not built";
  const auto examples = tool_examples(tool);
  ASSERT_FALSE(examples.empty()) << tool << " --help shows no examples";
  ASSERT_TRUE(std::ifstream(kInstalled + "/bin/" + tool))
      << kInstalled << "/bin/" << tool << " is missing: run the suite with ctest, or first cmake --install " << kBuild
      << " --prefix " << kInstalled;
  // As a user pastes them after the install step: the bare tool names resolve through PATH.
  run_in_workspace(tool + "-help", examples, "export PATH=" + shell_quote(kInstalled + "/bin") + ":\"$PATH\" && ");
}

INSTANTIATE_TEST_SUITE_P(Tools, HelpExamples, ::testing::ValuesIn(kTools), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (c == '-') c = '_';
  return n;
});

TEST(HelpExamples, EveryBuiltToolIsCovered) {
  DIR* d = opendir(KVC_BIN_DIR);
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.rfind("kvc-", 0) != 0) continue;
    bool known = false;
    for (const auto& t : kTools) known = known || t == name;
    EXPECT_TRUE(known) << name << " is built but its --help examples are not run";
  }
  closedir(d);
}

TEST(DocCommandParsing, JoinsContinuationsAndDropsComments) {
  const auto blocks = test::markdown_shell_blocks(
      "text\n```sh\n# a comment\nbuild/bin/kvc-eval ppl -m x \\\n  --file 'a # b' --json   # trailing\n\n"
      "bash recipes/q.sh\n```\n```\nnot shell\n```\n");
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].commands.size(), 2u);
  EXPECT_EQ(blocks[0].commands[0], "build/bin/kvc-eval ppl -m x --file 'a # b' --json");
  EXPECT_EQ(blocks[0].commands[1], "bash recipes/q.sh");
}

TEST(DocCommandParsing, ReadsHelpExamplesAndSubcommands) {
  const std::string help =
      "Usage: kvc-eval [OPTIONS] SUBCOMMAND\n\nSubcommands:\n  ppl    Perplexity\n  kl     KL\n\n"
      "Examples:\n  kvc-eval ppl -m m \\\n    -f f.txt\n  kvc-eval kl -m m -f f.txt\n";
  EXPECT_EQ(test::help_subcommands(help), (std::vector<std::string>{"ppl", "kl"}));
  EXPECT_EQ(test::help_examples(help),
            (std::vector<std::string>{"kvc-eval ppl -m m -f f.txt", "kvc-eval kl -m m -f f.txt"}));
}

}  // namespace
}  // namespace kvc
