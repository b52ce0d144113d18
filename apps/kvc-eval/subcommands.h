#pragma once
// Each kvc-eval subcommand registers its options and, when chosen, sets `action` to its body.
#include <CLI/CLI.hpp>

#include <functional>

namespace kvc::eval_app {

void add_ppl_command(CLI::App& app, std::function<int()>& action);
void add_kl_command(CLI::App& app, std::function<int()>& action);
void add_needle_command(CLI::App& app, std::function<int()>& action);
void add_tasks_command(CLI::App& app, std::function<int()>& action);
void add_longbench_command(CLI::App& app, std::function<int()>& action);
void add_longbench_score_command(CLI::App& app, std::function<int()>& action);
void add_sweep_command(CLI::App& app, std::function<int()>& action);
void add_merge_command(CLI::App& app, std::function<int()>& action);
void add_report_command(CLI::App& app, std::function<int()>& action);

}  // namespace kvc::eval_app
