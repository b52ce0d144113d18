#pragma once
// Flags shared by the task subcommands (needle, tasks, longbench, sweep): query mode, truncation,
// haystack, seed; and helpers to parse comma lists and write the result folder.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "harness/task_eval.h"
#include "model_options.h"

namespace kvc::eval_app {

struct HarnessOptions {
  std::string query = "aware";
  std::string truncate = "refuse";
  uint64_t seed = 0;
  // --chat: each prompt as one user turn of the model's chat template (or --chat-template's).
  bool chat = false;
  std::string system, chat_template;

  void add_to(CLI::App& app) {
    app.add_option("--query", query,
                   "aware: question prefilled with the context (compression sees it); agnostic: context "
                   "prefilled and compressed first, question fed after")
        ->capture_default_str();
    app.add_option("--truncate", truncate,
                   "Prompt longer than the model's context: middle (cut the middle of the prompt, with a "
                   "warning, as LongBench) or refuse (error)")
        ->capture_default_str();
    app.add_option("--seed", seed, "Seed of the generated samples")->capture_default_str();
    app.add_flag("--chat", chat,
                 "Wrap each prompt in the model's chat template as one user turn (context, then question) with "
                 "the assistant's turn opened, as LongBench's pred.py does for chat models; the question part "
                 "(with the turn's end and the assistant header) still follows the context in --query agnostic");
    app.add_option("--system", system, "With --chat: a system message before each prompt");
    app.add_option("--chat-template", chat_template,
                   "With --chat: a built-in template (chatml, gemma, llama2, llama3, mistral, plain) or a Jinja file "
                   "instead of the model's own");
  }
  EvalContext context(const LlamaModel& model, const Tokenizer& tokenizer) const {
    return EvalContext{model, tokenizer, parse_query_mode(query), parse_truncation(truncate)};
  }
};

// What shapes the prompts besides the task (--chat, --chat-template, --system, --bos / --no-bos), for the keys
// under which resumable results are reused; empty for the defaults, so earlier keys stay valid.
std::string prompt_format_key(const HarnessOptions& harness, const cli::ModelOptions& model);

// The haystack files: a file, or every *.txt in a folder (sorted); kvc::Error naming --haystack if none.
std::vector<std::string> haystack_files(const std::string& path);

// "256,512" -> {256, 512}; kvc::Error naming `flag` on a malformed item.
std::vector<int64_t> parse_int_list(const std::string& text, const std::string& flag);
std::vector<double> parse_double_list(const std::string& text, const std::string& flag);
std::vector<std::string> split_list(const std::string& text);

// Creates the output folder (and parents) if needed; kvc::Error naming --out-dir when it cannot.
void ensure_out_dir(const std::string& dir);

// Run metadata (eval_common.h) with the data entry replaced by several files and their combined hash,
// plus the method, its parameters and the harness settings.
nlohmann::json harness_metadata(const cli::ModelOptions& model_options, const LlamaModel& model,
                                const std::vector<std::string>& data_files, const std::string& method,
                                const HarnessOptions& harness, double wall_seconds);

}  // namespace kvc::eval_app
