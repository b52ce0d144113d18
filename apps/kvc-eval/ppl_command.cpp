// kvc-eval ppl: perplexity with the reference protocol or llama-perplexity's.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "eval/perplexity.h"
#include "eval_common.h"
#include "flag_vocabulary.h"
#include "subcommands.h"
#include "task_command.h"

namespace kvc::eval_app {

namespace {

struct PplCommandOptions : TaskCommandOptions {
  std::string file;
  WindowPlan plan;
  std::string protocol = "reference";
};

int run_ppl(PplCommandOptions& o) {
  o.plan.protocol = o.protocol == "llama.cpp" ? PerplexityProtocol::LlamaCpp : PerplexityProtocol::Reference;
  const TaskRun loaded(o);
  const LlamaModel& model = *loaded.model;
  o.plan.window_bos = loaded.tokenizer.prompt_bos(loaded.ctx.bos);
  const std::vector<int> ids = loaded.tokenize_file(o.file);
  const PerplexityResult r = evaluate_perplexity(model, ids, o.plan, !o.json);
  nlohmann::json out = {{"ppl", r.ppl},
                        {"tokens_in_file", ids.size()},  // BOS included where the tokenizer adds one
                        {"first_ids", std::vector<int>(ids.begin(), ids.begin() + std::min<size_t>(ids.size(), 8))},
                        {"window_bos", o.plan.window_bos ? nlohmann::json(*o.plan.window_bos) : nlohmann::json()},
                        {"tokens_scored", r.tokens_scored},
                        {"windows", r.windows},
                        {"windows_planned", r.windows_planned},
                        {"complete", !r.stopped},
                        {"window", o.plan.window},
                        {"max_windows", o.plan.max_windows},
                        {"protocol", o.protocol},
                        {"running_ppl", r.running_ppl},
                        {"total_nll", r.total_nll},
                        {"seconds", r.seconds},
                        {"metadata", run_metadata(o.model, model, o.file)}};
  if (r.stopped) say_windows_scored_before_interrupt(r.windows, r.windows_planned);
  if (o.json) {
    std::printf("%s\n", out.dump().c_str());
  } else {
    std::printf("perplexity %.5f over %lld tokens (%lld windows of %lld) in %.1fs\n", r.ppl,
                static_cast<long long>(r.tokens_scored), static_cast<long long>(r.windows),
                static_cast<long long>(o.plan.window), r.seconds);
  }
  return task_exit_code();
}

}  // namespace

void add_ppl_command(CLI::App& app, std::function<int()>& action) {
  auto o = std::make_shared<PplCommandOptions>();
  CLI::App* cmd = app.add_subcommand("ppl", "Perplexity over non-overlapping windows of a text file");
  cmd->footer(
      "\nExamples:\n  kvc-eval ppl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw "
      "-c 256 --max-windows 40 --json\n"
      "  kvc-eval ppl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw -c 128 --max-windows 8 "
      "--protocol llama.cpp\n");
  o->add_model_to(*cmd);
  cli::add_text_file(*cmd, o->file, "UTF-8 text file")->required();
  cli::add_ctx_size(*cmd, o->plan.window, "Window length in tokens")->capture_default_str();
  cmd->add_option("--max-windows", o->plan.max_windows, "Score only the first K windows (0 = all)")
      ->capture_default_str();
  cmd->add_option("--protocol", o->protocol,
                  "reference: score every token of each window but the first; llama.cpp: as llama-perplexity "
                  "(full windows, BOS first, score the second half)")
      ->check(CLI::IsMember({"reference", "llama.cpp"}))
      ->capture_default_str();
  cli::add_json_switch(*cmd, o->json);
  on_run(cmd, o, action, run_ppl);
}

}  // namespace kvc::eval_app
