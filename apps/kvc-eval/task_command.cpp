#include "task_command.h"

#include "flag_vocabulary.h"
#include "util/files.h"
#include "util/interrupt.h"

namespace kvc::eval_app {
namespace {

// Runs before the members load: a typo in --out-dir must not cost the model load.
const cli::ModelOptions& checked(const TaskCommandOptions& o) {
  if (!o.out.empty()) check_writable_output_folder(o.out);
  return o.model;
}

}  // namespace

void TaskCommandOptions::add_common_to(CLI::App& cmd, bool with_compression) {
  model.add_to(cmd);
  if (with_compression) compression.add_to(cmd);
  harness.add_to(cmd);
}

void TaskCommandOptions::add_output_to(CLI::App& cmd, const std::string& out_help, const std::string& json_help) {
  cli::add_out_dir(cmd, out, out_help);
  cli::add_json_switch(cmd, json, json_help);
}

TaskRun::TaskRun(const TaskCommandOptions& o)
    : start_(std::chrono::steady_clock::now()),
      model(checked(o).load_model()),
      tokenizer(o.model.load_tokenizer()),
      setup(build_cache_setup(o.compression.spec, *model)),
      ctx(o.harness.context(*model, tokenizer)) {}

double TaskRun::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int task_exit_code(bool failed) {
  if (interrupted()) return 130;
  return failed ? 1 : 0;
}

}  // namespace kvc::eval_app
