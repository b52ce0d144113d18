// kvc-cluster: clustered KV retrieval over RAM + storage. `build` clusters a prompt's cache into a
// store file and an index (with calibrated per-head thresholds τ_h), `verify` checks a store
// against its index (crash safety), `replay` decodes with the exact cache while measuring, side by
// side, what each update strategy would retrieve.
#include "flag_vocabulary.h"
#include "replay.h"
#include "tool_main.h"

namespace {

constexpr const char* kTool = "kvc-cluster";
constexpr const char* kExamples = R"(
Strategy specs: adaptive|static|local|pq|none[:topk=4,csize=8,segment=2048,iters=20,sinks=4,recent=16,bmax=16,
  tau_q=1,tau_scale=1,every=64,budget=0,layout=dual|naive,pool=0,coorder=1,gap=0,cache=aligned|lru,cache_kb=64,direct=1,async=1,
  prefetch=0,centroids=ram|storage,virtual=0,tails=small|storage|ram,metric=l2|cosine,subspaces=2,bits=6,label=NAME]

Examples:
  kvc-cluster replay -m data/models/kvc-micro-lm -f data/text/pg_essays/addiction.txt --prompt-tokens 64 \
      -n 200 -s adaptive -s static -s local -s none --out-dir out/replay --plot
  kvc-cluster replay -m data/models/stories260K -p "Once upon a time" -n 64 -s adaptive:bmax=0 -s adaptive:bmax=32 --json
  kvc-cluster replay -m data/models/stories260K -p "Once upon a time" -n 64 -s adaptive -s adaptive:centroids=storage --json
  kvc-cluster build -m data/models/stories260K -p "Once upon a time there was a little girl named Lily" --store s.kvs --index s.safetensors
  kvc-cluster verify --index s.safetensors
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace kvc::cluster_cli;
  CLI::App app{"Clustered KV retrieval from storage: build, verify and replay with update strategies.", kTool};
  app.footer(kExamples);
  app.require_subcommand(1);

  ReplayOptions replay;
  auto* r = app.add_subcommand("replay", "Decode greedily with the exact cache, measuring each strategy side by side");
  replay.model.add_to(*r);
  replay.model.add_bos_flags_to(*r);
  replay.prompt.add_to(*r);
  r->add_option("-s,--strategy", replay.strategies, "Strategy spec (repeat to compare in one run)")->required();
  r->add_option("-n,--steps", replay.steps, "Decode steps")->capture_default_str();
  kvc::cli::add_out_dir(*r, replay.out_dir,
                        "Write steps.csv, summary.json, store files (and PNGs with --plot) here (default: a temporary "
                        "folder, removed at exit)");
  r->add_option("--index", replay.index, "Take per-head thresholds τ_h from this index (kvc-cluster build)");
  kvc::cli::add_json_switch(*r, replay.json, "Print the totals as one JSON object on stdout");
  r->add_flag("--plot", replay.plot, "Render PNG plots with gnuplot into --out-dir");

  BuildOptions build;
  auto* b = app.add_subcommand("build", "Prefill a prompt, cluster it, commit the store and write its index");
  build.model.add_to(*b);
  build.prompt.add_to(*b);
  b->add_option("-s,--strategy", build.strategy, "Strategy spec (clustering and threshold settings)")
      ->capture_default_str();
  b->add_option("--store", build.store, "Store file to write (the index records it relative to its own folder)")
      ->required();
  b->add_option("--index", build.index, "Index file to write (.safetensors)")->required();
  kvc::cli::add_json_switch(*b, build.json, "Print a JSON summary");

  VerifyOptions verify;
  auto* v = app.add_subcommand("verify", "Check a store against its index: complete, untorn, same generation");
  v->add_option("--index", verify.index, "Index written by kvc-cluster build")->required();
  kvc::cli::add_json_switch(*v, verify.json, "Print a JSON summary");

  if (int code = kvc::cli::parse_or_exit(app, argc, argv, kTool); code >= 0) return code;
  return kvc::cli::run_tool(kTool, [&] {
    if (r->parsed()) return run_replay(replay);
    if (b->parsed()) return run_build(build);
    return run_verify(verify);
  });
}
