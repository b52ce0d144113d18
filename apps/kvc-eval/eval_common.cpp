#include "eval_common.h"

#include <cstdio>

#include "util/build_info.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/process_stats.h"

namespace kvc::eval_app {

nlohmann::json run_metadata(const cli::ModelOptions& model_options, const LlamaModel& model,
                            const std::string& data_path) {
  return {{"version", kvc::build_version()},
          {"commit", kvc::build_commit()},
          {"model", model_options.model_dir},
          {"model_config_hash", model.config().config_hash},
          {"data", data_path},
          {"data_hash", data_path.empty() || data_path == "-" ? "" : hash_file(data_path)},  // stdin: unhashed
          {"threads", at::get_num_threads()},
          {"device", model_options.device},
          {"peak_rss_bytes", peak_rss_bytes()},
          {"timestamp", iso_timestamp_utc()}};
}

void say_windows_scored_before_interrupt(int64_t scored, int64_t planned) {
  std::fprintf(stderr, "interrupted: the figures cover the %lld of %lld windows scored before Ctrl-C\n",
               static_cast<long long>(scored), static_cast<long long>(planned));
}

}  // namespace kvc::eval_app
