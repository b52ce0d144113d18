// kvc-eval: quality of a (compressed) KV cache — perplexity, KL vs the exact model, and task scores.
#include "subcommands.h"
#include "tool_main.h"

int main(int argc, char** argv) {
  constexpr const char* kTool = "kvc-eval";
  CLI::App app{"Evaluate a model and its (compressed) KV cache.", kTool};
  app.require_subcommand(1);
  std::function<int()> action;
  kvc::eval_app::add_ppl_command(app, action);
  kvc::eval_app::add_kl_command(app, action);
  kvc::eval_app::add_needle_command(app, action);
  kvc::eval_app::add_tasks_command(app, action);
  kvc::eval_app::add_longbench_command(app, action);
  kvc::eval_app::add_longbench_score_command(app, action);
  kvc::eval_app::add_sweep_command(app, action);
  kvc::eval_app::add_merge_command(app, action);
  kvc::eval_app::add_report_command(app, action);
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, action);
}
