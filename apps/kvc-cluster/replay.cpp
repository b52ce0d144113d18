// kvc-cluster replay: one exact run decides the tokens; every strategy runs the same tokens through
// its own retrieval cache (teacher forcing), so recall, KL and I/O are compared on identical input.
#include "replay.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>

#include "eval/kl_divergence.h"
#include "flag_vocabulary.h"
#include "harness/gnuplot.h"
#include "harness/tables.h"
#include "retrieval/index_file.h"
#include "retrieval/retrieval_layer_cache.h"
#include "retrieval/retrieval_setup.h"
#include "tool_main.h"
#include "util/build_info.h"
#include "util/error.h"
#include "util/files.h"
#include "util/hash.h"
#include "util/interrupt.h"
#include "util/output_lock.h"
#include "util/progress.h"
#include "util/subprocess.h"

namespace kvc::cluster_cli {
namespace rt = kvc::retrieval;
using Clock = std::chrono::steady_clock;

void PromptOptions::add_to(CLI::App& app) {
  app.add_option("-p,--prompt", prompt, "Prompt text");
  kvc::cli::add_text_file(app, prompt_file, "File holding the prompt text");
  app.add_option("--prompt-tokens", prompt_tokens, "Keep the first N prompt tokens (0: all)")->capture_default_str();
}

std::vector<int> PromptOptions::tokens(const kvc::cli::ModelOptions& model, const LlamaModel& m) const {
  KVC_CHECK(prompt.empty() != prompt_file.empty(), "give exactly one of -p/--prompt or -f/--file");
  const std::string text = prompt.empty() ? read_text_file(prompt_file) : prompt;
  std::vector<int> ids = model.load_tokenizer().encode_prompt(text, model.bos);
  if (prompt_tokens > 0 && static_cast<int64_t>(ids.size()) > prompt_tokens)
    ids.resize(static_cast<size_t>(prompt_tokens));
  KVC_CHECK(ids.size() >= 2, "the prompt has fewer than 2 tokens; give a longer --prompt");
  return ids;
}

namespace {

// Without --out-dir the store files go to a private temporary folder, removed when the run ends
// (normally or by an error), so nothing is left behind in /tmp.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& out_dir) {
    if (!out_dir.empty()) {
      KVC_CHECK(out_dir != "-",
                "--out-dir - : replay writes several files; give a folder name (--json prints to stdout)");
      path_ = out_dir;
      std::error_code ec;
      std::filesystem::create_directories(path_, ec);
      KVC_CHECK(!ec && is_directory(path_), "cannot create --out-dir '{}': {}", path_,
                ec ? ec.message() : std::string("a file of that name exists"));
      lock_.emplace(path_, "replay", "--out-dir");
      return;
    }
    std::string templ = (std::filesystem::temp_directory_path() / "kvc-cluster-XXXXXX").string();
    KVC_CHECK(::mkdtemp(templ.data()) != nullptr, "cannot create a temporary folder in {}: {}",
              std::filesystem::temp_directory_path().string(), std::strerror(errno));
    path_ = templ;
    temporary_ = true;
  }
  ~ScratchDir() {
    std::error_code ec;
    if (temporary_) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  bool temporary() const { return temporary_; }

 private:
  std::string path_;
  bool temporary_ = false;
  std::optional<OutputLock> lock_;  // one replay writes a --out-dir at a time
};

struct Run {
  rt::RetrievalConfig config;
  std::shared_ptr<rt::RetrievalShared> shared;
  std::unique_ptr<KVCache> cache;
  std::vector<rt::RetrievalLayerCache*> layers;
  double kl_sum = 0, seconds = 0;
  int64_t top1_agree = 0;
};

struct Snapshot {
  rt::IoCounters io;
  rt::CacheCounters cache;
  double recall_sum = 0, compute = 0;
  int64_t recall_count = 0, moved = 0;
};

Snapshot snapshot(const Run& r) {
  return {r.shared->store->counters(), r.shared->cache->counters(), r.shared->recall_sum,
          r.shared->compute_seconds,   r.shared->recall_count,      r.shared->split_moved_bytes};
}

std::pair<int64_t, double> cluster_summary(const Run& r) {
  int64_t n = 0;
  double var = 0;
  int64_t heads = 0;
  for (auto* l : r.layers)
    for (const auto& h : l->heads()) {
      for (const auto& c : h.clusters()) n += c.stats.n > 0;
      var += h.mean_variance();
      heads += 1;
    }
  return {n, heads > 0 ? var / heads : 0.0};
}

void write_plots(const std::string& dir, const std::vector<Run>& runs) {
  const std::string script = dir + "/plots.gp";
  std::ostringstream gp;
  gp << "set datafile separator ','\nset terminal pngcairo size 900,520 noenhanced\nset key outside right noenhanced\n"
     << "set grid\nset xlabel 'decode step'\n";
  const char* plots[][4] = {{"recall", "3", "attention recall (50-step mean)", "avg"},
                            {"kl", "4", "KL(exact || retrieval) (50-step mean)", "avg"},
                            {"clusters", "5", "clusters", "raw"},
                            {"variance", "6", "mean cluster variance", "raw"},
                            {"bytes_read", "7", "cumulative bytes read", "cum"},
                            {"read_ops", "8", "cumulative read operations", "cum"},
                            {"moved_bytes", "11", "cumulative bytes moved by updates", "cum"},
                            {"hit_rate", "13", "cache hit rate (50-step mean)", "avg"},
                            {"io_ms", "14", "I/O ms per step (50-step mean)", "avg"}};
  for (const auto& p : plots) {
    gp << "set output '" << p[0] << ".png'\nset ylabel '" << p[2] << "'\n";
    const std::string file = std::string(p[3]) == "raw"   ? "steps_grouped.csv"
                             : std::string(p[3]) == "cum" ? "steps_cum.csv"
                                                          : "steps_avg.csv";
    // One plot element per run, its label a gnuplot string literal: a label is data, never code.
    gp << "plot ";
    for (size_t i = 0; i < runs.size(); ++i)
      gp << (i ? ", \\\n     " : "") << "'" << file << "' index " << i << " using 1:" << p[1]
         << " with lines lw 2 title " << kvc::gnuplot_quoted(runs[i].config.name());
    gp << "\n";
  }
  kvc::write_file_atomic(script, gp.str());
  // Paths in the script are relative, so recipes/replot.sh can re-render the folder; no shell runs it.
  const auto result = kvc::run_program({"gnuplot", "plots.gp"}, dir);
  KVC_CHECK(result, "gnuplot could not be started for '{}' (apt-get install gnuplot-nox); the data files are written",
            script);
  KVC_CHECK(result->exit_code == 0, "gnuplot failed on '{}': {}; the data files are written", script,
            kvc::cli::first_line(result->output));
}

}  // namespace

int run_replay(const ReplayOptions& o) {
  KVC_CHECK(o.steps >= 1, "--steps must be at least 1");
  KVC_CHECK(!o.plot || !o.out_dir.empty(), "--plot needs --out-dir");
  const ScratchDir scratch(o.out_dir);  // outlives the runs below, which hold its store files open
  const std::string& dir = scratch.path();
  std::vector<rt::RetrievalConfig> configs;  // bad specs fail before the model loads
  for (const auto& spec : o.strategies) configs.push_back(rt::RetrievalConfig::parse(spec));
  auto model = o.model.load_model();
  const std::vector<int> prompt = o.prompt.tokens(o.model, *model);
  const ModelConfig& mc = model->config();
  const AttentionShape shape = mc.attention_shape();
  std::vector<std::vector<double>> thresholds;
  if (!o.index.empty()) thresholds = rt::read_index(o.index).thresholds;

  std::vector<Run> runs;
  for (size_t i = 0; i < o.strategies.size(); ++i) {
    Run r;
    r.config = configs[i];
    const CacheTypes types = model->cache_types();
    r.shared = rt::make_retrieval_shared(r.config, rt::record_format(mc.head_dim, types),
                                         dir + "/store-" + std::to_string(i) + ".kvs", true);
    r.cache = std::make_unique<KVCache>(
        model->new_cache(recording_layers(rt::retrieval_layer_factory(shape, model->rope(), r.shared), &r.layers)));
    runs.push_back(std::move(r));
  }
  KVCache exact = model->new_cache();
  ForwardOptions last;
  last.all_logits = false;
  at::Tensor logits = model->forward(prompt, exact, last);
  for (auto& r : runs) {
    model->forward(prompt, *r.cache, last);
    if (thresholds.empty()) continue;
    KVC_CHECK(thresholds.size() == r.layers.size(),
              "--index '{}' has thresholds for {} layers, the model keeps {} layers on storage", o.index,
              thresholds.size(), r.layers.size());
    for (size_t l = 0; l < r.layers.size(); ++l)
      for (size_t h = 0; h < r.layers[l]->heads().size(); ++h) r.layers[l]->heads()[h].set_threshold(thresholds[l][h]);
  }

  std::ofstream csv(dir + "/steps.csv");
  const std::string header =
      "step,strategy,recall,kl,clusters,mean_variance,bytes_read,read_ops,mean_read_bytes,max_read_bytes,moved_bytes,"
      "written_bytes,hit_rate,io_ms,compute_ms\n";
  csv << header;
  // Cumulative and 50-step running means, for the plots.
  // For the plots: per strategy, the raw rows, running totals and 50-step means, written at the end
  // as blank-line-separated blocks (gnuplot's `index`).
  std::vector<std::string> grouped_raw(runs.size()), grouped_cum(runs.size()), grouped_avg(runs.size());
  std::vector<std::vector<std::vector<double>>> history(runs.size());
  std::vector<std::vector<double>> totals(runs.size(), std::vector<double>(15, 0.0));

  Progress progress("replay", o.steps, "step");
  int next = static_cast<int>(logits.argmax(-1).item<int64_t>());
  int64_t done = 0;
  for (int64_t step = 1; step <= o.steps && !interrupted(); ++step) {
    logits = model->forward({next}, exact, last);
    for (size_t i = 0; i < runs.size(); ++i) {
      Run& r = runs[i];
      const Snapshot before = snapshot(r);
      const auto t0 = Clock::now();
      const at::Tensor l = model->forward({next}, *r.cache, last);
      r.seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      const Snapshot after = snapshot(r);
      const double k = kl_divergence(log_probabilities(logits), log_probabilities(l)).sum().item<double>();
      r.kl_sum += k;
      r.top1_agree += l.argmax(-1).item<int64_t>() == logits.argmax(-1).item<int64_t>();
      const rt::IoCounters io = after.io.minus(before.io);
      const auto [clusters, variance] = cluster_summary(r);
      const int64_t lookups = after.cache.lookups - before.cache.lookups, hits = after.cache.hits - before.cache.hits;
      const double recall = after.recall_count > before.recall_count
                                ? (after.recall_sum - before.recall_sum) / (after.recall_count - before.recall_count)
                                : 1.0;
      std::vector<double> row = {static_cast<double>(step),
                                 0,
                                 recall,
                                 k,
                                 static_cast<double>(clusters),
                                 variance,
                                 static_cast<double>(io.read_bytes),
                                 static_cast<double>(io.read_ops),
                                 io.read_ops > 0 ? static_cast<double>(io.read_bytes) / io.read_ops : 0.0,
                                 static_cast<double>(io.read_run_max),
                                 static_cast<double>(io.moved_bytes + after.moved - before.moved),
                                 static_cast<double>(io.written_bytes),
                                 lookups > 0 ? double(hits) / lookups : 1.0,
                                 io.read_seconds * 1e3,
                                 (after.compute - before.compute) * 1e3};
      const auto line = [&](const std::vector<double>& v) {
        std::string text = std::to_string(step) + "," + kvc::csv_field(r.config.name());  // a spec holds commas
        for (size_t c = 2; c < v.size(); ++c) text += fmt::format(",{:.9g}", v[c]);
        return text + "\n";
      };
      csv << line(row);
      grouped_raw[i] += line(row);
      for (size_t c = 2; c < row.size(); ++c) totals[i][c] += row[c];
      std::vector<double> c_row = totals[i];
      c_row[4] = row[4], c_row[5] = row[5];
      grouped_cum[i] += line(c_row);
      history[i].push_back(row);
      std::vector<double> a(row.size(), 0.0);
      const size_t w = std::min<size_t>(50, history[i].size());
      for (size_t s = history[i].size() - w; s < history[i].size(); ++s)
        for (size_t c = 2; c < row.size(); ++c) a[c] += history[i][s][c] / w;
      grouped_avg[i] += line(a);
    }
    next = static_cast<int>(logits.argmax(-1).item<int64_t>());
    done = step;
    progress.advance();
  }
  progress.finish();
  csv.close();
  const auto write_grouped = [&](const std::string& name, const std::vector<std::string>& blocks) {
    std::string text = "# " + header;
    for (size_t i = 0; i < blocks.size(); ++i) text += (i > 0 ? "\n\n" : "") + blocks[i];
    write_file_atomic(dir + "/" + name, text);
  };
  write_grouped("steps_grouped.csv", grouped_raw);
  write_grouped("steps_cum.csv", grouped_cum);
  write_grouped("steps_avg.csv", grouped_avg);

  nlohmann::json out = {
      {"tool", "kvc-cluster replay"},
      {"version", kvc::build_version()},
      {"commit", kvc::build_commit()},
      {"model", o.model.model_dir},
      {"model_config_hash", mc.config_hash},
      {"prompt_source", o.prompt.prompt_file.empty() ? "--prompt" : o.prompt.prompt_file},
      {"prompt_hash", o.prompt.prompt_file.empty() ? hash_string(o.prompt.prompt) : hash_file(o.prompt.prompt_file)},
      {"prompt_tokens", prompt.size()},
      {"threads", at::get_num_threads()},
      {"steps", done},
      {"decoding", "greedy on the exact cache; every strategy fed the same tokens"},
      {"out_dir", scratch.temporary() ? "" : dir},
      {"strategies", nlohmann::json::array()}};
  for (size_t i = 0; i < runs.size(); ++i) {
    Run& r = runs[i];
    const rt::IoCounters& io = r.shared->store->counters();
    const auto [clusters, variance] = cluster_summary(r);
    const auto& cc = r.shared->cache->counters();
    const double seq_bw = r.shared->store->sequential_read_bandwidth();
    const double n = std::max<int64_t>(1, done);
    const rt::PrefetchCounters pf = r.shared->prefetch ? r.shared->prefetch->counters() : rt::PrefetchCounters{};
    out["strategies"].push_back({
        {"name", r.config.name()},
        {"strategy", rt::strategy_name(r.config.strategy)},
        {"mean_recall", totals[i][2] / n},
        {"mean_kl", r.kl_sum / n},
        {"top1_agreement", r.top1_agree / n},
        {"final_clusters", clusters},
        {"final_mean_variance", variance},
        {"splits", r.shared->splits},
        {"forced_splits", r.shared->forced_splits},
        {"delayed_splits", r.shared->delayed_splits},
        {"split_read_bytes", r.shared->split_read_bytes},
        {"split_read_ops", r.shared->split_read_ops},
        {"bytes_read", io.read_bytes},
        {"update_bytes_read", io.update_read_bytes},
        {"read_ops", io.read_ops},
        {"mean_read_bytes", io.read_ops > 0 ? double(io.read_bytes) / io.read_ops : 0.0},
        {"max_read_bytes", io.read_run_max},
        {"moved_bytes", io.moved_bytes + r.shared->split_moved_bytes},
        {"written_bytes", io.written_bytes},
        {"mean_entries_attended_per_head",
         r.shared->recall_count > 0 ? double(r.shared->retrieved_entries) / r.shared->recall_count : 0.0},
        {"cache_hit_rate", cc.lookups > 0 ? double(cc.hits) / cc.lookups : 0.0},
        {"io_seconds", io.read_seconds},
        {"io_wait_seconds", r.shared->io_wait_seconds},
        {"compute_seconds", r.shared->compute_seconds},
        {"async_io", r.config.async_io},
        {"prefetch", r.config.prefetch},
        {"prefetch_issued", pf.issued},
        {"prefetch_used", pf.used},
        {"prefetch_stale", pf.stale},
        {"prefetch_hit_rate", pf.issued > 0 ? double(pf.used) / pf.issued : 0.0},
        {"prefetch_wait_seconds", pf.wait_seconds},
        {"centroids", rt::centroid_spill_json(*r.shared)},
        {"cache_peak_bytes", cc.peak_bytes},
        {"virtual_cache", rt::virtual_cache_json(*r.shared)},
        {"decode_seconds", r.seconds},
        {"effective_read_bandwidth", io.read_seconds > 0 ? io.read_bytes / io.read_seconds : 0.0},
        {"sequential_read_bandwidth", seq_bw},
        {"direct_io", r.shared->store->direct()},
        {"store_bytes", r.shared->store->file_pages() * rt::PageStore::kPageBytes},
    });
  }
  write_file_atomic(dir + "/summary.json", out.dump(2) + "\n");
  std::string md =
      "| strategy | recall | KL | top-1 | clusters | mean var | KiB read | read ops | mean read KiB | KiB moved | hit "
      "rate | "
      "I/O s | compute s | eff. MB/s | seq. MB/s |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& s : out["strategies"]) {
    md += fmt::format(
        "| {} | {:.4f} | {:.5f} | {:.3f} | {} | {:.3f} | {:.0f} | {} | {:.1f} | {:.0f} | {:.3f} | {:.3f} | {:.3f} | "
        "{:.0f} | {:.0f} |\n",
        s["name"].get<std::string>(), s["mean_recall"].get<double>(), s["mean_kl"].get<double>(),
        s["top1_agreement"].get<double>(), s["final_clusters"].get<int64_t>(), s["final_mean_variance"].get<double>(),
        s["bytes_read"].get<int64_t>() / 1024.0, s["read_ops"].get<int64_t>(),
        s["mean_read_bytes"].get<double>() / 1024.0, s["moved_bytes"].get<int64_t>() / 1024.0,
        s["cache_hit_rate"].get<double>(), s["io_seconds"].get<double>(), s["compute_seconds"].get<double>(),
        s["effective_read_bandwidth"].get<double>() / 1e6, s["sequential_read_bandwidth"].get<double>() / 1e6);
  }
  write_file_atomic(dir + "/summary.md", md);
  if (o.plot) write_plots(dir, runs);
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-28s %7s %8s %8s %6s %11s %8s %9s %10s %7s %8s %9s\n", "strategy", "recall", "KL", "clusters", "var",
              "bytes_read", "ops", "mean_run", "moved", "hit", "io_s", "seqMB/s");
  for (const auto& s : out["strategies"]) {
    std::printf("%-28s %7.4f %8.5f %8lld %6.2f %11lld %8lld %9.0f %10lld %7.3f %8.3f %9.0f\n",
                s["name"].get<std::string>().c_str(), s["mean_recall"].get<double>(), s["mean_kl"].get<double>(),
                static_cast<long long>(s["final_clusters"].get<int64_t>()), s["final_mean_variance"].get<double>(),
                static_cast<long long>(s["bytes_read"].get<int64_t>()),
                static_cast<long long>(s["read_ops"].get<int64_t>()), s["mean_read_bytes"].get<double>(),
                static_cast<long long>(s["moved_bytes"].get<int64_t>()), s["cache_hit_rate"].get<double>(),
                s["io_seconds"].get<double>(), s["sequential_read_bandwidth"].get<double>() / 1e6);
  }
  return 0;
}

}  // namespace kvc::cluster_cli
