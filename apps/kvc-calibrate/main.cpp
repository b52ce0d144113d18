// kvc-calibrate: PCA bases of pre-RoPE keys and values per layer, for the low-rank KV cache.
#include <nlohmann/json.hpp>

#include <cstdio>

#include "flag_vocabulary.h"
#include "lowrank/calibration.h"
#include "lowrank/lowrank_setup.h"
#include "lowrank/rank_search.h"
#include "model_options.h"
#include "rank_options.h"
#include "tool_main.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/run_files.h"

int main(int argc, char** argv) {
  constexpr const char* kTool = "kvc-calibrate";
  CLI::App app{"Calibrate per-layer PCA bases of the KV cache (input to kvc-train and --lowrank --rank).", kTool};
  app.footer(R"(
Per layer, the pre-RoPE keys and (separately) values of every token, all KV heads concatenated
(d_kv = n_kv_heads * head_dim), are accumulated into a float64 second-moment matrix E[x xᵀ] and
eigendecomposed; eigenvectors are stored sorted by descending eigenvalue. The statistics are NOT
mean-centred: the cache reconstructs x from its leading coefficients with no mean added back, and
the uncentred second moment is what minimises that truncation error. The keys are also rotated
at their positions (RoPE) and get a basis of their own: the one --lowrank FILE:keys=rotated stores
them in, so that decoding scores them without rebuilding them.

Several processes split the windows (window w goes to rank w % ranks) and add up their float64 sums
over c10d (Gloo): launched by torchrun or Slurm, they read their rank from its environment; rank 0
writes the file and the report. The bases equal one process's up to the order of the additions.

Examples:
  kvc-calibrate -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt \
      --tokens 20000 -o bases.safetensors
  MASTER_PORT=29511 scripts/ranks.sh 2 kvc-calibrate -m data/models/stories260K \
      -f data/text/tinystories/tinystories_excerpt_30k.txt --tokens 20000 -o bases2.safetensors
  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw --lowrank bases.safetensors --rank 8
  kvc-eval kl -m data/models/stories260K -f data/text/wikitext2/wiki.test.raw --lowrank bases.safetensors:share=0.25
)");
  kvc::cli::ModelOptions model_options;
  model_options.add_to(app);
  model_options.add_bos_flags_to(app);
  std::vector<std::string> data;
  std::string output;
  kvc::lowrank::CalibrationOptions options;
  kvc::cli::RankOptions rank_options;
  bool json = false;
  kvc::cli::add_text_files(app, data, "Calibration text files (UTF-8)")->required();
  app.add_option("--tokens", options.tokens, "Use at most this many tokens")->capture_default_str();
  kvc::cli::add_ctx_size(app, options.seq_len, "Window length (each window starts from an empty cache)")
      ->capture_default_str();
  kvc::cli::add_output_file(app, output, "Where to write bases.safetensors")->required();
  kvc::cli::add_json_switch(app, json, "Print one JSON summary object on stdout");
  rank_options.add_to(app);
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] {
    KVC_CHECK(!(json && output == "-"), "-o - and --json would both write to stdout; give -o a file name");
    const std::shared_ptr<kvc::Ranks> ranks = rank_options.join();
    if (ranks->is_root()) kvc::claim_writable_output(output);  // before the calibration pass
    auto model = model_options.load_model();
    const kvc::Tokenizer tokenizer = model_options.load_tokenizer();
    std::vector<int> ids;
    for (const auto& path : data) {
      KVC_CHECK(kvc::file_exists(path), "-f/--file: file not found: '{}'", path);
      const auto document = tokenizer.encode_prompt(kvc::read_text_file(path), model_options.bos);
      ids.insert(ids.end(), document.begin(), document.end());
    }
    ranks->check_same("models", model->config().config_hash);
    ranks->check_same("calibration data", kvc::hash_files(data));
    ranks->check_same("--tokens or --ctx-size", std::to_string(options.tokens) + "/" + std::to_string(options.seq_len));
    options.show_progress = !json;
    const auto result = kvc::lowrank::calibrate(*model, ids, options, ranks.get());
    if (!ranks->is_root()) return 0;
    kvc::lowrank::Artifact a = kvc::lowrank::bases_artifact(result);
    a.metadata["data_hash"] = kvc::hash_files(data);
    a.metadata["seq_len"] = std::to_string(options.seq_len);
    kvc::lowrank::write_artifact(output, a, model->config());

    const int64_t d = model->config().kv_dim();
    const int64_t ks[3] = {std::max<int64_t>(1, d / 4), std::max<int64_t>(1, d / 2), std::max<int64_t>(1, 3 * d / 4)};
    nlohmann::json layers = nlohmann::json::array();
    // With -o - stdout carries the safetensors file, so the report goes to stderr.
    FILE* report = output == "-" ? stderr : stdout;
    if (!json)
      std::fprintf(report, "explained variance (uncentred) at 25/50/75%% of d_kv = %lld:\n", static_cast<long long>(d));
    for (size_t l = 0; l < result.keys.size(); ++l) {
      nlohmann::json row = {{"layer", l}};
      for (const auto& [name, basis] :
           {std::pair<const char*, const kvc::lowrank::EigenBasis&>{"k", result.keys[l]},
            std::pair<const char*, const kvc::lowrank::EigenBasis&>{"v", result.values[l]}}) {
        std::vector<double> e;
        for (int64_t k : ks) e.push_back(basis.explained(k));
        row[name] = e;
        if (!json) std::fprintf(report, "  layer %zu %s: %.4f %.4f %.4f\n", l, name, e[0], e[1], e[2]);
      }
      layers.push_back(row);
    }
    // Fixed ranks per layer and K/V searched under a memory budget, as --lowrank FILE:share=S uses them.
    nlohmann::json searched = nlohmann::json::array();
    if (!json)
      std::fprintf(report, "ranks searched for a kept share (--lowrank %s:share=S), keys | values by layer:\n",
                   output == "-" ? "FILE" : output.c_str());
    const auto searched_layers = kvc::lowrank::lowrank_layers(model->config());
    for (const double share : {0.5, 0.3, 0.2}) {
      if (share * static_cast<double>(d) < 1) continue;
      const auto r = kvc::lowrank::search_ranks(a, searched_layers, share);
      std::string k, v;
      for (const int64_t l : searched_layers) {
        k += (k.empty() ? "" : "/") + std::to_string(r.keys[l]);
        v += (v.empty() ? "" : "/") + std::to_string(r.values[l]);
      }
      const double mean = r.explained / static_cast<double>(2 * searched_layers.size());
      searched.push_back({{"share", share}, {"key_ranks", k}, {"value_ranks", v}, {"mean_explained", mean}});
      if (!json)
        std::fprintf(report, "  share %.1f: %s | %s (mean explained %.4f)\n", share, k.c_str(), v.c_str(), mean);
    }
    const nlohmann::json out = {{"output", output},
                                {"tokens", result.tokens},
                                {"kv_dim", d},
                                {"ranks_at_25_50_75", {ks[0], ks[1], ks[2]}},
                                {"explained", layers},
                                {"model_config_hash", model->config().config_hash},
                                {"data_hash", a.metadata["data_hash"]},
                                {"mean_centred", false},
                                {"ranks", ranks->world()},
                                {"exchange_seconds", result.exchange_seconds},
                                {"searched_ranks", searched}};
    if (json) std::printf("%s\n", out.dump().c_str());
    else if (output != "-")
      std::printf("wrote %s (%lld tokens)\n", output.c_str(), static_cast<long long>(result.tokens));
    return 0;
  });
}
