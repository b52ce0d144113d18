#include "task_command.h"

#include <filesystem>

#include "flag_vocabulary.h"
#include "util/error.h"
#include "util/files.h"
#include "util/interrupt.h"

namespace kvc::eval_app {
namespace {

// Runs before the members load: a typo in --out-dir or --dump-kept must not cost the model load.
const cli::ModelOptions& checked(const TaskCommandOptions& o) {
  if (!o.out.empty()) check_writable_output_folder(o.out);
  if (!o.compression.dump_kept.empty()) check_writable_output_folder(o.compression.dump_kept);
  KVC_CHECK(o.harness.chat || (o.harness.system.empty() && o.harness.chat_template.empty()),
            "--system and --chat-template shape the chat format; add --chat");
  if (o.harness.chat) resolve_chat_template(o.harness.chat_template, o.model.model_dir);  // a bad name fails here
  return o.model;
}

EvalContext evaluation_context(const TaskCommandOptions& o, const LlamaModel& model, const Tokenizer& tokenizer,
                               const CacheSetup& setup) {
  EvalContext ctx = o.harness.context(model, tokenizer);
  ctx.bos = o.model.bos;
  if (o.harness.chat) {
    ctx.chat = std::make_shared<const ChatFormat>(ChatFormat{
        std::make_shared<const ChatTemplate>(resolve_chat_template(o.harness.chat_template, o.model.model_dir)),
        o.harness.system});
  }
  if (!o.compression.dump_kept.empty()) {
    KVC_CHECK(setup.make_observer, "--dump-kept {}: needs a token-eviction method (--press)", o.compression.dump_kept);
    std::filesystem::create_directories(o.compression.dump_kept);
    ctx.dump_kept_dir = o.compression.dump_kept;
  }
  return ctx;
}

}  // namespace

void TaskCommandOptions::add_common_to(CLI::App& cmd, bool with_compression) {
  add_model_to(cmd);
  if (with_compression) add_compression_to(cmd);
  harness.add_to(cmd);
}

void TaskCommandOptions::add_compression_to(CLI::App& cmd) {
  compression.add_to(cmd);
  cmd.add_option("--dump-kept", compression.dump_kept,
                 "Write what the compression kept for each sample to DIR/<sample id>.safetensors "
                 "(positions per layer x KV head; see kvc-generate --dump-kept)");
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
      ctx(evaluation_context(o, *model, tokenizer, setup)) {}

std::vector<int> TaskRun::tokenize_file(const std::string& path) const {
  return tokenizer.encode_prompt(read_text_file(path), ctx.bos);
}

double TaskRun::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

int task_exit_code(bool failed) {
  if (interrupted()) return 130;
  return failed ? 1 : 0;
}

}  // namespace kvc::eval_app
