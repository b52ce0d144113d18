#pragma once
// The compression flags shared by kvc-generate and kvc-eval.
#include <CLI/CLI.hpp>

#include <cstdio>

#include "compression/compression_spec.h"
#include "flag_vocabulary.h"
#include "press/press_registry.h"
#include "util/checked_number.h"

namespace kvc::cli {

struct CompressionOptions {
  CompressionSpec spec;
  std::string dump_kept;

  void add_to(CLI::App& app) {
    app.add_option("--press", spec.press, "Token eviction method NAME[:key=val,...] (see --list-presses)")
        ->capture_default_str();
    app.add_option("--ratio", spec.ratio, "Share of the prompt's KV cache to remove, in [0, 1)")->capture_default_str();
    app.add_option("--budget", spec.budget, "Entries to keep per KV head (instead of --ratio)")
        ->check([](const std::string& given) -> std::string {
          const auto count = parse_integer(given);  // not a number: CLI11's conversion reports it
          if (count && *count <= 0)
            return given + " keeps nothing: give a positive count of entries per KV head (e.g. 64)";
          return {};
        });
    app.add_option("--budgets", spec.budgets_file, "Per-layer budgets from kvc-profile (profile.safetensors)")
        ->check(refuse_empty_path);
    app.add_option(
           "--lowrank", spec.lowrank_file,
           "Low-rank cache: gates.safetensors[:tau=T], bases.safetensors with --rank R (or :ranks=r0/r1/...), "
           "or bases.safetensors:share=S (ranks per layer and K/V searched for a kept share S of the cache); add "
           "keys=rotated (e.g. bases.safetensors:share=0.3,keys=rotated) to store keys after RoPE in a basis of "
           "rotated keys, which a decode step scores without rebuilding them; gates take gate=f16 (e.g. "
           "gates.safetensors:keys=rotated,gate=f16) to read the gate's matrix in 16 bits, half its bytes per step; "
           "Palu's grouped bases: bases.safetensors:group=S (a basis per group of S KV heads, from the "
           "calibration) or palu[:group=S] (from the K/V projection weights' SVD; every KV head one group by default), "
           "with --rank R")
        ->check(refuse_empty_path);
    app.add_option("--rank", spec.rank, "Fixed rank per token with a bases file");
    app.add_option("--retrieval", spec.retrieval,
                   "KV cache on storage, clustered or product-quantised: "
                   "adaptive|static|local|pq[:topk=4,cache_kb=64,...] (see kvc-cluster --help)");
    // Answered while parsing, before the required options are checked, like --help.
    app.add_flag_callback(
        "--list-presses",
        [] {
          for (const auto& e : registered_presses()) std::printf("%-16s %s\n", e.name.c_str(), e.description.c_str());
          throw CLI::Success();
        },
        "List the registered eviction methods and exit");
  }

  // Only for kvc-generate, which makes one cache per run (evaluations make one per sequence, on temporary files).
  void add_retrieval_store_to(CLI::App& app) {
    app.add_option("--retrieval-store", spec.retrieval_store, "Store file for --retrieval (default: a temporary file)");
  }

  // Only for the tools that write the file (a flag a tool accepted and ignored would be a silent no-op).
  void add_dump_kept_to(CLI::App& app) {
    app.add_option("--dump-kept", dump_kept,
                   "Write the positions each layer x KV head kept (and merged) to FILE.safetensors");
  }
};

}  // namespace kvc::cli
