#include "compression/compression_spec.h"

#include <fmt/format.h>

#include "compression/press_registry.h"
#include "lowrank/lowrank_setup.h"
#include "util/error.h"

namespace kvc {

std::string CompressionSpec::describe() const {
  if (is_uncompressed()) return "none";
  std::string d = press.empty() ? "none" : press;
  if (budget > 0) d += fmt::format(" budget={}", budget);
  else if (ratio > 0) d += fmt::format(" ratio={}", ratio);
  if (!budgets_file.empty()) d += " budgets=" + budgets_file;
  if (!lowrank_file.empty()) d += " lowrank=" + lowrank_file + (rank > 0 ? fmt::format(" rank={}", rank) : "");
  return d;
}

CacheSetup build_cache_setup(const CompressionSpec& spec, const LlamaModel& model) {
  KVC_CHECK(spec.ratio >= 0 && spec.ratio < 1, "--ratio must be in [0, 1), got {}", spec.ratio);
  KVC_CHECK(spec.budget >= 0, "--budget must be >= 0, got {}", spec.budget);
  PressParams params = PressParams::parse(spec.press.empty() ? "none" : spec.press);
  params.ratio = spec.ratio;
  params.budget = spec.budget;
  params.budgets_file = spec.budgets_file;
  CacheSetup setup = make_press_setup(params, model);
  // Low-rank storage composes with eviction: the press keeps its observer and calls retain() on it.
  if (!spec.lowrank_file.empty()) {
    setup.factory = lowrank::make_lowrank_factory(lowrank::parse_lowrank_spec(spec.lowrank_file, spec.rank), model);
  } else {
    KVC_CHECK(spec.rank == 0, "--rank needs --lowrank bases.safetensors (from kvc-calibrate)");
  }
  setup.name = spec.describe();
  return setup;
}

}  // namespace kvc
