#include "compression/compression_spec.h"

#include <cmath>

#include <fmt/format.h>

#include "lowrank/lowrank_setup.h"
#include "press/press_registry.h"
#include "retrieval/retrieval_setup.h"
#include "util/error.h"

namespace kvc {

std::string CompressionSpec::describe() const {
  if (is_uncompressed()) return "none";
  if (!retrieval.empty()) return "retrieval " + retrieval;
  std::string d = press.empty() ? "none" : press;
  if (budget > 0) d += fmt::format(" budget={}", budget);
  else if (ratio > 0) d += fmt::format(" ratio={}", ratio);
  if (!budgets_file.empty()) d += " budgets=" + budgets_file;
  if (!lowrank_file.empty()) d += " lowrank=" + lowrank_file + (rank > 0 ? fmt::format(" rank={}", rank) : "");
  if (!cache_type.empty()) d += " cache=" + cache_type;
  return d;
}

void check_flag_combination(const CompressionSpec& spec) {
  const std::string name = PressParams::parse(spec.press.empty() ? "none" : spec.press).name;
  // A value out of range is named as such, before the checks below take it for "no size given".
  KVC_CHECK(std::isfinite(spec.ratio) && spec.ratio >= 0 && spec.ratio < 1,
            "--ratio must be in [0, 1), got {} (the share of the cache removed, e.g. 0.5)", spec.ratio);
  KVC_CHECK(spec.budget >= 0, "--budget {}: the entries kept per KV head must be a positive count (e.g. 64)",
            spec.budget);
  KVC_CHECK(!(spec.ratio > 0 && spec.budget > 0),
            "--ratio {} and --budget {} conflict (a share removed vs entries kept per KV head); give one of them",
            spec.ratio, spec.budget);
  KVC_CHECK(spec.budgets_file.empty() || name != "none",
            "--budgets {} needs a method to apply it: add --press NAME (e.g. --press snapkv) and --ratio",
            spec.budgets_file);
  KVC_CHECK(name == "none" || spec.ratio > 0 || spec.budget > 0 || press_sizes_itself(name),
            "--press {} compresses nothing without a size: add --ratio R (share of the cache removed, e.g. 0.5) or "
            "--budget N (entries kept per KV head)",
            spec.press);
  KVC_CHECK(spec.rank == 0 || !spec.lowrank_file.empty(),
            "--rank needs --lowrank bases.safetensors (from kvc-calibrate)");
  KVC_CHECK(spec.retrieval.empty() || (name == "none" && spec.lowrank_file.empty()),
            "--retrieval {} keeps the cache on storage and reads back what each step needs; it cannot be combined "
            "with --press or --lowrank: give one of them",
            spec.retrieval);
  KVC_CHECK(spec.cache_type.empty() || (spec.retrieval.empty() && spec.lowrank_file.empty()),
            "a typed cache row ({}) stores the dense cache in that type; it cannot be combined with --retrieval or "
            "--lowrank (give --cache-type-k/-v to the tool instead)",
            spec.cache_type);
  KVC_CHECK(spec.retrieval_store.empty() || !spec.retrieval.empty(),
            "--retrieval-store {} needs --retrieval STRATEGY (e.g. --retrieval adaptive)", spec.retrieval_store);
}

namespace {

// The press's needs against a layer of the cache `cache_flag` asked for.
void check_layout(const CacheSetup& setup, const std::string& press, const std::string& cache_flag) {
  const std::unique_ptr<LayerCache> layer = setup.layout()(0);
  const MergeableRows* rows = layer->mergeable_rows();
  KVC_CHECK(!setup.needs.merge || (rows != nullptr && rows->can_merge()),
            "--press {} merges evicted entries into kept ones and needs the dense cache; it cannot be combined with {} "
            "(the {} cache)",
            press, cache_flag, layer->layout());
  KVC_CHECK(!setup.needs.read_rows || (rows != nullptr && rows->can_merge()),
            "--press {} reads every cached key back to score the cache again while decoding, which the {} cache "
            "cannot give; it cannot be combined with {}",
            press, layer->layout(), cache_flag);
  KVC_CHECK(!setup.needs.per_head_lengths || layer->per_head_layout() != nullptr,
            "--press {} keeps a different number of entries per KV head, which the {} cache cannot; it cannot be "
            "combined with {}",
            press, layer->layout(), cache_flag);
}

}  // namespace

CacheSetup build_cache_setup(const CompressionSpec& spec, const LlamaModel& model) {
  KVC_CHECK(std::isfinite(spec.ratio) && spec.ratio >= 0 && spec.ratio < 1, "--ratio must be in [0, 1), got {}",
            spec.ratio);
  KVC_CHECK(spec.budget >= 0, "--budget must be >= 0, got {}", spec.budget);
  check_flag_combination(spec);
  if (!spec.retrieval.empty()) {
    CacheSetup setup = retrieval::make_retrieval_setup(spec.retrieval, spec.retrieval_store, model);
    setup.name = spec.describe();
    return setup;
  }
  PressParams params = PressParams::parse(spec.press.empty() ? "none" : spec.press);
  params.ratio = spec.ratio;
  params.budget = spec.budget;
  params.budgets_file = spec.budgets_file;
  CacheSetup setup = make_press_setup(params, model);
  // Low-rank storage composes with eviction: the press keeps its observer and calls retain() on it.
  if (!spec.lowrank_file.empty()) {
    setup.set_layer_factory(
        lowrank::make_lowrank_factory(lowrank::parse_lowrank_spec(spec.lowrank_file, spec.rank), model));
    check_layout(setup, params.name, "--lowrank");
    // A press compresses a low-rank layer after that layer's prefill attention, as it does a dense one.
    setup.shared_prefill_layout = fmt::format("lowrank {} rank={}", spec.lowrank_file, spec.rank);
  } else {
    KVC_CHECK(spec.rank == 0, "--rank needs --lowrank bases.safetensors (from kvc-calibrate)");
    if (!spec.cache_type.empty()) {
      const at::ScalarType type = parse_cache_type(spec.cache_type, "typed cache");
      setup.cache_types = CacheTypes{type, type}.resolved(model.dtype());
      check_cache_types_fit(setup.cache_types, model.config().head_dim, model.device());
      KVC_CHECK(!setup.has_layout(),
                "--press {} builds caches of its own layout, which a typed cache row ({}) cannot "
                "type; use --cache-type-k/-v",
                params.name, spec.cache_type);
    }
    const CacheTypes t = setup.dense_cache_types(model);
    KVC_CHECK(!setup.needs.merge || !t.any_block_format(),
              "--press {} merges evicted entries into kept ones, which a {} / {} cache cannot rewrite in place (its "
              "rows are blocks sharing one scale); use {}--cache-type-k/-v f16 or bf16",
              params.name, cache_type_name(t.keys), cache_type_name(t.values),
              params.name == "d2o" ? "merge=0, or " : "");
    KVC_CHECK(!setup.needs.read_rows || !t.any_block_format(),
              "--press {} reads every cached key back to score the cache again while decoding, which a {} / {} "
              "cache holds only as blocks; use --cache-type-k/-v f16 or bf16",
              params.name, cache_type_name(t.keys), cache_type_name(t.values));
  }
  setup.name = spec.describe();
  return setup;
}

}  // namespace kvc
