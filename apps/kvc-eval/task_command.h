#pragma once
// The skeleton every kvc-eval subcommand shares: the same options (model, compression, harness, output
// folder, --json; each command registers the groups it takes), the same steps (check the output folder
// before the model loads → model → tokenizer → cache setup → evaluation context), and the same exit codes.
#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "compression_options.h"
#include "harness_options.h"
#include "model_options.h"

namespace kvc::eval_app {

struct TaskCommandOptions {
  cli::ModelOptions model;
  cli::CompressionOptions compression;  // sweep leaves it unregistered: its cells name their methods
  HarnessOptions harness;
  std::string out;
  bool json = false;

  // Model, compression and harness flags (without_compression: model and harness only).
  void add_common_to(CLI::App& cmd, bool with_compression = true);
  void add_model_to(CLI::App& cmd) {
    model.add_to(cmd);
    model.add_bos_flags_to(cmd);
  }
  // --press, --ratio, ... and --dump-kept DIR.
  void add_compression_to(CLI::App& cmd);
  // --out-dir and --json.
  void add_output_to(CLI::App& cmd, const std::string& out_help, const std::string& json_help);
};

// A loaded run. Built in place (the evaluation context refers to the model and tokenizer it holds).
class TaskRun {
  std::chrono::steady_clock::time_point start_;  // first: the run's time includes loading

 public:
  explicit TaskRun(const TaskCommandOptions& options);
  TaskRun(const TaskRun&) = delete;
  TaskRun& operator=(const TaskRun&) = delete;

  double seconds() const;

  const std::shared_ptr<LlamaModel> model;
  const Tokenizer tokenizer;
  const CacheSetup setup;
  const EvalContext ctx;

  // The tokens of a text file with the prompt's BOS/EOS rules (the perplexity and KL protocols).
  std::vector<int> tokenize_file(const std::string& path) const;
};

// 130 after Ctrl-C (finished results are kept), 1 when some part failed, else 0.
int task_exit_code(bool failed = false);

// Registers the subcommand's body: `run` runs once the command line is parsed.
template <class Options>
void on_run(CLI::App* cmd, std::shared_ptr<Options> options, std::function<int()>& action, int (*run)(Options&)) {
  cmd->callback([options, &action, run] { action = [options, run] { return run(*options); }; });
}

}  // namespace kvc::eval_app
