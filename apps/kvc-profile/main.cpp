// kvc-profile: profiles a model's attention over text and writes profile.safetensors (per-layer
// variance/entropy, retention shares of the layer-adaptive methods, per-layer budgets for given
// ratios), profile.csv and heatmap PNGs. `kvc-generate --budgets profile.safetensors` applies them.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "flag_vocabulary.h"
#include "harness/gnuplot.h"
#include "io/safetensors.h"
#include "model/tensor_bridge.h"
#include "model_options.h"
#include "press/attention_profile.h"
#include "press/lukv_profile.h"
#include "tool_main.h"
#include "util/build_info.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/staged_folder.h"
#include "util/subprocess.h"

namespace {

constexpr const char* kTool = "kvc-profile";
constexpr const char* kExamples = R"(
Examples:
  kvc-profile -m data/models/stories260K -f data/text/tinystories/tinystories_excerpt_30k.txt --out-dir out/prof
  kvc-profile -m data/models/kvc-micro-lm -f data/text/pg_essays/addiction.txt -c 512 --windows 2 --ratios 0.5,0.9 --out-dir out/prof-micro --json
  kvc-generate -m data/models/stories260K -p "Once upon a time" --press snapkv --ratio 0.5 --budgets out/prof/profile.safetensors
  kvc-profile -m data/models/kvc-micro-lm -f data/text/pg_essays/addiction.txt -c 256 --windows 2 --lukv-press keydiff --out-dir out/lukv-micro
  kvc-generate -m data/models/kvc-micro-lm -f data/text/pg_essays/addiction.txt --prompt-tokens 300 -n 8 --press lukv:curve=out/lukv-micro/lukv.safetensors --ratio 0.5
)";

struct Options {
  kvc::cli::ModelOptions model;
  std::string data, out_dir;
  kvc::ProfileOptions profile;
  kvc::LukvProfileOptions lukv;  // lukv.press empty: no LU-KV curve
  bool json = false, no_plot = false;
};

std::string csv(const kvc::AttentionProfile& p, const std::vector<double>& ratios) {
  std::ostringstream s;
  s << "layer,attention_variance,attention_entropy,d2o_weight";
  for (double r : ratios) s << ",kvcompose_keep@" << r << ",dynamickv_keep@" << r << ",budget_share@" << r;
  s << "\n";
  for (int64_t l = 0; l < p.layer_variance.numel(); ++l) {
    s << l << "," << p.layer_variance[l].item<double>() << "," << p.layer_entropy[l].item<double>() << ","
      << p.d2o_layer_weights[l].item<double>();
    for (size_t r = 0; r < ratios.size(); ++r) {
      const auto ri = static_cast<int64_t>(r);
      s << "," << p.kvcompose_retention[ri][l].item<double>() << "," << p.dynamickv_retention[ri][l].item<double>()
        << "," << p.layer_budget_shares[ri][l].item<double>();
    }
    s << "\n";
  }
  return s.str();
}

// One row per layer x KV head: the share LU-KV prunes at each of `ratios`.
std::string lukv_csv(const kvc::LukvProfile& p, const std::vector<double>& ratios) {
  std::ostringstream s;
  s << "layer,kv_head";
  for (double r : ratios) s << ",prune@" << r;
  s << "\n";
  for (size_t l = 0; l < p.layers.size(); ++l) {
    for (int64_t h = 0; h < p.prune.size(2); ++h) {
      s << p.layers[l] << "," << h;
      for (double r : ratios) {
        const int64_t row = std::clamp<int64_t>(std::llround(r * 100) - 1, 0, 98);
        s << "," << p.prune[row][static_cast<int64_t>(l)][h].item<double>();
      }
      s << "\n";
    }
  }
  return s.str();
}

// A matrix as gnuplot "matrix" data: one row per line.
std::string matrix_text(const at::Tensor& m) {
  std::ostringstream s;
  const at::Tensor c = m.to(at::kDouble).contiguous();
  for (int64_t i = 0; i < c.size(0); ++i) {
    for (int64_t j = 0; j < c.size(1); ++j) s << (j ? " " : "") << c[i][j].item<double>();
    s << "\n";
  }
  return s.str();
}

// Writes the data and a gnuplot script into `dir`; runs gnuplot there when it is installed. Returns the
// names of the PNGs made.
std::vector<std::string> plot(const Options& o, const kvc::AttentionProfile& p, const std::string& dir) {
  kvc::write_file_atomic(dir + "/retention_matrix.txt", matrix_text(p.kvcompose_retention.t()));
  kvc::write_file_atomic(dir + "/cumulative_matrix.txt", matrix_text(p.cumulative_attention.clamp_min(1e-6).log10()));
  std::ostringstream ratios;
  for (size_t i = 0; i < o.profile.ratios.size(); ++i)
    ratios << (i ? ", " : "") << kvc::gnuplot_quoted(fmt::format("{}", o.profile.ratios[i])) << " " << i;
  // Names relative to the folder, where gnuplot runs: the folder's own name never enters the script.
  std::ostringstream gp;
  gp << "set terminal pngcairo size 900,500 noenhanced\nset view map\nunset key\nset autoscale fix\n"
     << "set output 'heatmap_layers_ratio.png'\n"
     << "set title 'KVCompose: share of each layer kept, by ratio'\nset xlabel 'compression ratio'\n"
     << "set ylabel 'layer'\nset xtics (" << ratios.str() << ")\n"
     << "plot 'retention_matrix.txt' matrix with image\n"
     << "set output 'heatmap_layers_tokens.png'\nset xtics auto\n"
     << "set title 'log10 cumulative attention received (mean over heads and windows)'\n"
     << "set xlabel 'token position'\nset ylabel 'layer'\n"
     << "plot 'cumulative_matrix.txt' matrix with image\n";
  kvc::write_file_atomic(dir + "/heatmap.gp", gp.str());
  if (o.no_plot) return {};
  if (!kvc::gnuplot_available()) {
    std::fprintf(stderr, "%s: warning: gnuplot not found; run 'gnuplot heatmap.gp' in %s to draw the heatmaps\n", kTool,
                 dir.c_str());
    return {};
  }
  const auto result = kvc::run_program({"gnuplot", "heatmap.gp"}, dir);
  KVC_CHECK(result && result->exit_code == 0, "gnuplot failed on {}/heatmap.gp: {}", o.out_dir,
            result ? kvc::cli::first_line(result->output) : std::string("it could not be started"));
  return {"heatmap_layers_ratio.png", "heatmap_layers_tokens.png"};
}

// What every file kvc-profile writes records of its run: the tool, the model (its config_hash is what a
// reader checks) and the profiling text.
void set_run_metadata(kvc::st::SafetensorsWriter& w, const Options& o, const kvc::LlamaModel& model) {
  w.set_metadata("tool", kTool);
  w.set_metadata("version", kvc::build_version());
  w.set_metadata("commit", kvc::build_commit());
  w.set_metadata("model", o.model.model_dir);
  w.set_metadata("config_hash", model.config().config_hash);
  w.set_metadata("data", o.data);
  w.set_metadata("data_hash", kvc::hash_file(o.data));
}

int run(const Options& o) {
  KVC_CHECK(!o.data.empty(),
            "-f/--file is required (profiling text, e.g. data/text/tinystories/tinystories_excerpt_30k.txt)");
  KVC_CHECK(!o.out_dir.empty(), "--out-dir is required (folder for profile.safetensors, profile.csv, heatmaps)");
  KVC_CHECK(o.out_dir != "-",
            "--out-dir - : the profile is several files; give a folder name (--json prints to stdout)");
  for (double r : o.profile.ratios) KVC_CHECK(r > 0 && r < 1, "--ratios: each ratio must be in (0, 1), got {}", r);
  o.profile.validate();  // before the model loads
  kvc::LukvProfileOptions lukv = o.lukv;
  lukv.context = o.profile.context;
  lukv.windows = o.profile.windows;
  lukv.show_progress = o.profile.show_progress;
  if (!lukv.press.empty()) lukv.validate();
  kvc::check_writable_output_folder(o.out_dir);
  auto model = o.model.load_model();
  const kvc::Tokenizer tokenizer = o.model.load_tokenizer();
  const std::vector<int> ids = tokenizer.encode_prompt(kvc::read_text_file(o.data), o.model.bos);
  const kvc::AttentionProfile p = kvc::profile_attention(*model, ids, o.profile);
  kvc::LukvProfile curve;
  if (!lukv.press.empty()) curve = kvc::profile_lukv(*model, ids, lukv);
  // Made only now that there is a profile to write; every file is written into a staging folder and
  // moved in together at the end, so a failed or interrupted run (a full disk, gnuplot missing a
  // terminal) leaves the folder as it was.
  kvc::StagedFolder out(o.out_dir);

  kvc::st::SafetensorsWriter w;
  kvc::add_tensor(w, "layer_variance", p.layer_variance);
  kvc::add_tensor(w, "layer_entropy", p.layer_entropy);
  kvc::add_tensor(w, "d2o_layer_weights", p.d2o_layer_weights);
  kvc::add_tensor(w, "ratios", p.ratios);
  kvc::add_tensor(w, "kvcompose_retention", p.kvcompose_retention);
  kvc::add_tensor(w, "kvcompose_head_retention", p.kvcompose_head_retention);
  kvc::add_tensor(w, "dynamickv_retention", p.dynamickv_retention);
  kvc::add_tensor(w, "layer_budget_shares", p.layer_budget_shares);
  kvc::add_tensor(w, "cumulative_attention", p.cumulative_attention);
  set_run_metadata(w, o, *model);
  w.set_metadata("context", std::to_string(p.context));
  w.set_metadata("windows", std::to_string(p.windows));
  w.set_metadata("task_window", std::to_string(o.profile.task_window));
  w.set_metadata("budget_method", "kvcompose");
  const std::string st_path = o.out_dir + "/profile.safetensors";
  w.write(out.path("profile.safetensors"));
  kvc::write_file_atomic(out.path("profile.csv"), csv(p, o.profile.ratios));
  const std::string lukv_path = o.out_dir + "/lukv.safetensors";
  if (!lukv.press.empty()) {
    // The budget curve `--press lukv:curve=FILE` reads, with what it was made from: the press it ranks by and
    // its protected ends are the press's (lukv.cpp).
    kvc::st::SafetensorsWriter c;
    kvc::add_tensor(c, "lukv_prune", curve.prune.to(at::kFloat));
    kvc::add_tensor(c, "lukv_utility", curve.utility);
    set_run_metadata(c, o, *model);
    c.set_metadata("lukv_press", lukv.press);
    c.set_metadata("lukv_sink", std::to_string(lukv.sink));
    c.set_metadata("lukv_recent", std::to_string(lukv.recent));
    c.set_metadata("lukv_horizon", std::to_string(lukv.horizon));
    c.set_metadata("context", std::to_string(lukv.context));
    c.set_metadata("windows", std::to_string(curve.windows));
    std::string layers;
    for (int64_t l : curve.layers) layers += (layers.empty() ? "" : ",") + std::to_string(l);
    c.set_metadata("layers", layers);
    c.write(out.path("lukv.safetensors"));
    kvc::write_file_atomic(out.path("lukv.csv"), lukv_csv(curve, o.profile.ratios));
  }
  std::vector<std::string> pngs = plot(o, p, out.staging());
  kvc::stop_if_interrupted("interrupted; nothing written");
  out.commit();
  for (std::string& png : pngs) png = o.out_dir + "/" + png;

  if (o.json) {
    nlohmann::json j{{"tool", kTool},
                     {"version", kvc::build_version()},
                     {"commit", kvc::build_commit()},
                     {"model", o.model.model_dir},
                     {"model_config_hash", model->config().config_hash},
                     {"data", o.data},
                     {"data_hash", kvc::hash_file(o.data)},
                     {"windows", p.windows},
                     {"context", p.context},
                     {"threads", at::get_num_threads()},
                     {"ratios", o.profile.ratios},
                     {"profile", st_path},
                     {"csv", o.out_dir + "/profile.csv"},
                     {"heatmaps", pngs}};
    if (!lukv.press.empty()) {
      j["lukv"] = {
          {"curve", lukv_path}, {"csv", o.out_dir + "/lukv.csv"}, {"press", lukv.press},     {"horizon", lukv.horizon},
          {"sink", lukv.sink},  {"recent", lukv.recent},          {"windows", curve.windows}};
    }
    std::vector<double> var, ent;
    for (int64_t l = 0; l < p.layer_variance.numel(); ++l) {
      var.push_back(p.layer_variance[l].item<double>());
      ent.push_back(p.layer_entropy[l].item<double>());
    }
    j["layer_variance"] = var;
    j["layer_entropy"] = ent;
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s", csv(p, o.profile.ratios).c_str());
    std::fprintf(
        stderr, "%s: wrote %s, %s/profile.csv%s%s\n", kTool, st_path.c_str(), o.out_dir.c_str(),
        pngs.empty() ? "" : " and heatmaps",
        lukv.press.empty() ? "" : (", LU-KV curve " + lukv_path + " (--press lukv:curve=" + lukv_path + ")").c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Profile a model's attention and write per-layer budgets for --budgets.", kTool};
  app.footer(kExamples);
  Options o;
  o.model.add_to(app);
  o.model.add_bos_flags_to(app);
  kvc::cli::add_text_file(app, o.data, "Profiling text file (or task samples as text)");
  kvc::cli::add_out_dir(app, o.out_dir, "Output folder (profile.safetensors, profile.csv, heatmaps)");
  kvc::cli::add_ctx_size(app, o.profile.context, "Tokens per profiling window")->capture_default_str();
  app.add_option("--windows", o.profile.windows, "Number of windows")->capture_default_str();
  app.add_option("--task-window", o.profile.task_window, "Last tokens of a window used as task tokens")
      ->capture_default_str();
  app.add_option("--ratios", o.profile.ratios, "Compression ratios to compute budgets for")->delimiter(',');
  app.add_option("--lukv-press", o.lukv.press,
                 "Also write LU-KV's budget curve (lukv.safetensors, lukv.csv) for this press's ranking, e.g. "
                 "expected_attention; --press lukv:curve=DIR/lukv.safetensors applies it");
  app.add_option("--lukv-horizon", o.lukv.horizon,
                 "Tokens after each --ctx-size context whose attention defines LU-KV's oracle importance")
      ->capture_default_str();
  app.add_option("--lukv-sink", o.lukv.sink, "Oldest entries LU-KV always keeps")->capture_default_str();
  app.add_option("--lukv-recent", o.lukv.recent, "Newest entries LU-KV always keeps")->capture_default_str();
  kvc::cli::add_json_switch(app, o.json, "Print a JSON summary instead of the CSV");
  app.add_flag("--no-plot", o.no_plot, "Skip running gnuplot (the script is still written)");
  // Old spellings: -d/--data for the text, -o/--out for the folder.
  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool, {{"-d", "--file"}, {"-o", "--out-dir"}}); code >= 0)
    return code;
  return kvc::cli::run_tool(kTool, [&] { return run(o); });
}
