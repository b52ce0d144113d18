#pragma once
// Shared by kvc-eval's subcommands: loading the evaluation text and run metadata.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "model_options.h"

namespace kvc::eval_app {

// Tool version, model and its config hash, data file and its hash, threads, device, peak RSS.
// One line on stderr for a window loop that Ctrl-C stopped early (ppl, kl).
void say_windows_scored_before_interrupt(int64_t scored, int64_t planned);

nlohmann::json run_metadata(const cli::ModelOptions& model_options, const LlamaModel& model,
                            const std::string& data_path);

}  // namespace kvc::eval_app
