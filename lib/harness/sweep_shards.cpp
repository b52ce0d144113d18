#include "harness/sweep_shards.h"

#include <dirent.h>
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>

#include "harness/result_store.h"
#include "runtime/ranks.h"
#include "util/checked_number.h"
#include "util/error.h"
#include "util/files.h"

namespace kvc {
namespace {

const char* const kMainResults = "results.jsonl";

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  KVC_CHECK(d != nullptr, "--out-dir: cannot list '{}'", dir);
  while (const dirent* e = ::readdir(d)) out.emplace_back(e->d_name);
  ::closedir(d);
  return out;
}

ShardStatus read_shard_status(const std::string& path) {
  const nlohmann::json j = nlohmann::json::parse(read_text_file(path), nullptr, /*allow_exceptions=*/false);
  const bool valid = j.is_object() && j.value("shard", -1) >= 0 && j.value("shards", 0) > j.value("shard", -1) &&
                     j.contains("settings") && j["settings"].is_string() && j.contains("plan") &&
                     j["plan"].is_array() && j.value("done", int64_t{-1}) >= 0 && j.value("owned", int64_t{-1}) >= 0;
  KVC_CHECK(valid, "{}: not a shard status file written by kvc-eval sweep --shard (delete it and re-run that shard)",
            path);
  ShardStatus s;
  s.shard = {j["shard"].get<int>(), j["shards"].get<int>()};
  s.settings = j["settings"].get<std::string>();
  for (const auto& key : j["plan"]) {
    KVC_CHECK(key.is_string(), "{}: plan entries must be cell names", path);
    s.plan.push_back(key.get<std::string>());
  }
  s.done = j["done"].get<int64_t>();
  s.owned = j["owned"].get<int64_t>();
  return s;
}

}  // namespace

std::string SweepShard::results_name() const { return fmt::format("results.shard-{}-of-{}.jsonl", index, count); }
std::string SweepShard::status_name() const { return fmt::format("shard-{}-of-{}.json", index, count); }

SweepShard parse_sweep_shard(const std::string& text) {
  if (text == "auto") {
    const RankEnvironment env = rank_environment();
    if (env.world > 1) return {env.rank, env.world};
    // A Slurm array: each task is a job of its own, numbered from SLURM_ARRAY_TASK_MIN.
    const char* id = std::getenv("SLURM_ARRAY_TASK_ID");
    const char* min = std::getenv("SLURM_ARRAY_TASK_MIN");
    const char* count = std::getenv("SLURM_ARRAY_TASK_COUNT");
    if (id != nullptr && min != nullptr && count != nullptr) {
      const auto i = parse_integer(id), lo = parse_integer(min), n = parse_integer(count);
      KVC_CHECK(
          i && lo && n && *n >= 1 && *n <= 65536 && *i - *lo >= 0 && *i - *lo < *n,
          "--shard auto: the Slurm array's task IDs are not 0..N-1 from SLURM_ARRAY_TASK_MIN (ID {}, MIN {}, COUNT "
          "{}); give the shard as I/N",
          id, min, count);
      return {static_cast<int>(*i - *lo), static_cast<int>(*n)};
    }
    KVC_CHECK(!env.launcher.empty(),
              "--shard auto: no launcher environment (torchrun's RANK and WORLD_SIZE, Slurm's "
              "SLURM_PROCID and SLURM_NTASKS, or a Slurm array); give the shard as I/N");
    fail(
        "--shard auto: the launcher started one process ({}), so there is nothing to share the cells with; start "
        "several, or give the shard as I/N",
        env.launcher);
  }
  const size_t slash = text.find('/');
  const auto index = parse_integer(text.substr(0, slash));
  const auto count = slash == std::string::npos ? std::nullopt : parse_integer(text.substr(slash + 1));
  KVC_CHECK(index && count && *count >= 1 && *count <= 65536 && *index >= 0 && *index < *count,
            "--shard '{}': expected I/N with 0 <= I < N (e.g. 0/4), or auto", text);
  return {static_cast<int>(*index), static_cast<int>(*count)};
}

void write_shard_status(const std::string& dir, const ShardStatus& s) {
  const nlohmann::json j = {{"shard", s.shard.index}, {"shards", s.shard.count}, {"settings", s.settings},
                            {"done", s.done},         {"owned", s.owned},        {"plan", s.plan}};
  write_file_atomic(dir + "/" + s.shard.status_name(), j.dump(1) + "\n");
}

MergedSweep merge_sweep_shards(const std::string& dir, bool allow_partial) {
  KVC_CHECK(is_directory(dir), "--out-dir: '{}' is not a folder", dir);
  std::map<int, ShardStatus> statuses;
  int count = 0;
  std::string first;
  for (const std::string& name : files_in(dir)) {
    int index = 0, shards = 0, end = 0;
    const bool status_file = std::sscanf(name.c_str(), "shard-%d-of-%d.json%n", &index, &shards, &end) == 2 &&
                             end == static_cast<int>(name.size());
    if (!status_file) continue;
    const std::string path = dir + "/" + name;
    ShardStatus s = read_shard_status(path);
    KVC_CHECK(s.shard.status_name() == name, "{}: holds shard {} of {}; the file was renamed", path, s.shard.index,
              s.shard.count);
    if (first.empty()) {
      first = path;
      count = s.shard.count;
    }
    KVC_CHECK(s.shard.count == count,
              "{}: a sweep in {} shards, but {} is one in {}; keep one sharding per "
              "--out-dir",
              path, s.shard.count, first, count);
    const ShardStatus& f = statuses.empty() ? s : statuses.begin()->second;
    KVC_CHECK(s.settings == f.settings && s.plan == f.plan,
              "{}: made with other settings or another plan (methods, "
              "ratios, tasks) than {}; every shard must be started with the same flags",
              path, first);
    statuses.emplace(s.shard.index, std::move(s));
  }
  KVC_CHECK(!statuses.empty(),
            "--out-dir: '{}' has no shard-I-of-N.json files; run kvc-eval sweep --shard I/N "
            "into it first",
            dir);
  const ShardStatus& any = statuses.begin()->second;

  MergedSweep merged;
  merged.shards = count;
  merged.plan_cells = static_cast<int64_t>(any.plan.size());
  std::map<std::string, nlohmann::json> found;
  std::vector<nlohmann::json> earlier;  // results.jsonl cells that are not in this plan
  const std::set<std::string> in_plan(any.plan.begin(), any.plan.end());
  const auto take = [&](const std::string& path, bool main_file) {
    if (!file_exists(path)) return;
    const ResultStore store(path);
    for (const auto& r : store.records()) {
      KVC_CHECK(r.value("settings", "") == any.settings,
                "{}: holds cells made with other settings than the shards "
                "(model, --query, --seed, lengths, samples or data differ); merge into another --out-dir",
                path);
      const std::string key = r["cell"].get<std::string>();
      if (!in_plan.count(key)) {
        if (main_file) earlier.push_back(r);
        continue;
      }
      found.emplace(key, r);  // the first copy wins: results.jsonl, then the shards in order
    }
  };
  take(dir + "/" + kMainResults, true);
  for (int i = 0; i < count; ++i) take(dir + "/" + SweepShard{i, count}.results_name(), false);

  for (const std::string& key : any.plan) {
    const auto it = found.find(key);
    if (it == found.end()) ++merged.missing;
    else merged.records.push_back(it->second);
  }
  merged.records.insert(merged.records.end(), earlier.begin(), earlier.end());
  for (int i = 0; i < count; ++i) {
    const auto it = statuses.find(i);
    if (it == statuses.end()) {
      merged.incomplete.push_back(fmt::format("shard {} of {}: not started", i, count));
    } else if (it->second.done < it->second.owned) {
      merged.incomplete.push_back(
          fmt::format("shard {} of {}: {} of {} cells", i, count, it->second.done, it->second.owned));
    }
  }
  if (!allow_partial && merged.missing > 0) {
    fail(
        "{} of the sweep's {} cells have no result ({}); run those shards again with the same flags (each resumes "
        "where it stopped), or merge what is there with --allow-partial",
        merged.missing, merged.plan_cells, fmt::join(merged.incomplete, "; "));
  }
  return merged;
}

void write_merged_results(const std::string& dir, const std::vector<nlohmann::json>& records) {
  std::string text;
  for (const auto& r : records) text += r.dump() + "\n";
  write_file_atomic(dir + "/" + kMainResults, text);
}

}  // namespace kvc
