// Every command the README and the tools' --help examples tell a user to type runs here, with the
// exact flags, from a scratch folder laid out like the repository root (data/, recipes/, build/).
// Recipes see KVC_SMOKE=1 and run their own commands at small sizes; tools run as written.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <set>
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
                          " " + dir + "/build && if [ -d " + shell_quote(kSource + "/.venv-models") + " ]; then ln -s " +
                          shell_quote(kSource + "/.venv-models") + " " + dir + "/.venv-models; fi";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return dir;
}

// Runs the commands in order in one workspace (later commands may read what earlier ones wrote).
void run_in_workspace(const std::string& name, const std::vector<std::string>& commands) {
  const std::string dir = make_workspace(name);
  for (const std::string& command : commands) {
    const std::string script = "cd " + shell_quote(dir) + " && export KVC_SMOKE=1 && timeout 900 bash -o pipefail -c " +
                               shell_quote(command) + " </dev/null";
    const auto r = test::run_command(script);
    const auto tail = [](const std::string& s) { return s.size() > 3000 ? s.substr(s.size() - 3000) : s; };
    ASSERT_EQ(r.exit_code, 0) << "command: " << command << "\n--- stderr:\n" << tail(r.err) << "\n--- stdout:\n"
                              << tail(r.out);
  }
}

std::vector<test::DocBlock> readme_blocks() {
  std::vector<test::DocBlock> blocks = test::markdown_shell_blocks(test::slurp(kSource + "/README.md"));
  for (auto& b : blocks) {
    std::vector<std::string> kept;
    for (const auto& c : b.commands)
      if (!excluded(c)) kept.push_back(c);
    b.commands = kept;
  }
  return blocks;
}

class ReadmeBlock : public ::testing::TestWithParam<test::DocBlock> {};

TEST_P(ReadmeBlock, RunsAsWritten) {
  const test::DocBlock& block = GetParam();
  if (block.commands.empty()) GTEST_SKIP() << "only excluded commands";
  run_in_workspace(block.name, block.commands);
}

INSTANTIATE_TEST_SUITE_P(Readme, ReadmeBlock, ::testing::ValuesIn(readme_blocks()),
                         [](const auto& info) { return info.param.name; });

TEST(ReadmeCommands, ExclusionsAreStillInTheReadme) {
  const auto blocks = test::markdown_shell_blocks(test::slurp(kSource + "/README.md"));
  for (const auto& e : kExclusions) {
    bool found = false;
    for (const auto& b : blocks)
      for (const auto& c : b.commands) found = found || c == e.command;
    EXPECT_TRUE(found) << "stale exclusion: " << e.command;
  }
}

TEST(ReadmeCommands, EveryToolCommandIsInAShellBlock) {
  // Commands mentioned inline (`build/bin/...` in prose) escape this test; keep them in shell blocks.
  const std::string readme = test::slurp(kSource + "/README.md");
  size_t pos = 0;
  std::set<std::string> inline_commands;
  while ((pos = readme.find("`build/bin/", pos)) != std::string::npos) {
    const size_t end = readme.find('`', pos + 1);
    const std::string text = readme.substr(pos + 1, end - pos - 1);
    if (text.find(' ') != std::string::npos) inline_commands.insert(text);
    pos = end;
  }
  const auto blocks = test::markdown_shell_blocks(readme);
  for (const auto& c : inline_commands) {
    bool found = false;
    for (const auto& b : blocks)
      for (const auto& bc : b.commands) found = found || bc == c;
    EXPECT_TRUE(found) << "inline command not in any shell block: " << c;
  }
}

TEST(ReadmeCommands, EveryRecipeItNamesRunsInAShellBlock) {
  const std::string readme = test::slurp(kSource + "/README.md");
  const auto blocks = test::markdown_shell_blocks(readme);
  size_t pos = 0;
  while ((pos = readme.find("recipes/", pos)) != std::string::npos) {
    size_t end = pos + 8;
    while (end < readme.size() && (std::isalnum(static_cast<unsigned char>(readme[end])) || readme[end] == '_')) ++end;
    const std::string recipe = readme.substr(pos, end - pos);
    pos = end;
    if (readme.compare(end, 3, ".sh") != 0) continue;
    bool found = false;
    for (const auto& b : blocks)
      for (const auto& c : b.commands) found = found || c.find(recipe + ".sh") != std::string::npos;
    EXPECT_TRUE(found) << recipe << ".sh is named in the README but no shell block runs it";
  }
}

const std::vector<std::string> kTools = {"kvc-generate", "kvc-eval",  "kvc-profile", "kvc-calibrate",
                                         "kvc-train",    "kvc-cluster", "kvc-bench",   "kvc-make-checkpoint",
                                         "kvc-tokenize"};

// The tool's examples and those of its subcommands, with build/bin/ in front of the tool names.
std::vector<std::string> tool_examples(const std::string& tool) {
  const auto help = test::run_command(test::bin(tool) + " --help");
  EXPECT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> examples = test::help_examples(help.out);
  for (const std::string& sub : test::help_subcommands(help.out)) {
    const auto sub_help = test::run_command(test::bin(tool) + " " + sub + " --help");
    EXPECT_EQ(sub_help.exit_code, 0) << sub_help.err;
    for (const auto& e : test::help_examples(sub_help.out)) examples.push_back(e);
  }
  for (auto& e : examples) {
    for (const std::string& t : kTools) {
      size_t p = 0;
      while ((p = e.find(t, p)) != std::string::npos) {
        const bool word_start = p == 0 || e[p - 1] == ' ' || e[p - 1] == '|' || e[p - 1] == '(';
        const size_t after = p + t.size();
        const bool word_end = after == e.size() || e[after] == ' ';
        if (word_start && word_end) {
          e.insert(p, "build/bin/");
          p += 10;
        }
        p += t.size();
      }
    }
  }
  return examples;
}

class HelpExamples : public ::testing::TestWithParam<std::string> {};

TEST_P(HelpExamples, RunAsPastedFromTheRepositoryRoot) {
  const std::string tool = GetParam();
  if (!std::ifstream(test::bin(tool))) GTEST_SKIP() << tool << " is not built";
  const auto examples = tool_examples(tool);
  ASSERT_FALSE(examples.empty()) << tool << " --help shows no examples";
  run_in_workspace(tool + "-help", examples);
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
