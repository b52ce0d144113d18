#pragma once
// kvc-cluster subcommands (one file each).
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "model_options.h"

namespace kvc::cluster_cli {

struct PromptOptions {
  std::string prompt, prompt_file;
  int64_t prompt_tokens = 64;
  void add_to(CLI::App& app);
  std::vector<int> tokens(const kvc::cli::ModelOptions& model, const LlamaModel& m) const;
};

struct ReplayOptions {
  kvc::cli::ModelOptions model;
  PromptOptions prompt;
  std::vector<std::string> strategies;
  int64_t steps = 256;
  std::string out_dir, index;
  bool json = false, plot = false;
};

struct BuildOptions {
  kvc::cli::ModelOptions model;
  PromptOptions prompt;
  std::string strategy = "adaptive", store, index;
  bool json = false;
};

struct VerifyOptions {
  std::string index;
  bool json = false;
};

int run_replay(const ReplayOptions& o);
int run_build(const BuildOptions& o);
int run_verify(const VerifyOptions& o);

}  // namespace kvc::cluster_cli
