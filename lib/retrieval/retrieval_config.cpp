#include "retrieval/retrieval_config.h"

#include <sstream>

#include "util/checked_number.h"
#include "util/error.h"
#include "util/spec_parser.h"

namespace kvc::retrieval {
namespace {

int64_t to_int(const std::string& spec, const std::string& key, const std::string& v) {
  const auto x = parse_integer(v);
  if (x && *x >= 0) return *x;
  fail("--retrieval '{}': {}={} is not a non-negative integer", spec, key, v);
}

double to_double(const std::string& spec, const std::string& key, const std::string& v) {
  const auto x = parse_finite_number(v);
  if (x && *x >= 0) return *x;
  fail("--retrieval '{}': {}={} is not a non-negative number", spec, key, v);
}

}  // namespace

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kAdaptive: return "adaptive";
    case Strategy::kStatic: return "static";
    case Strategy::kLocal: return "local";
    case Strategy::kNone: return "none";
  }
  return "?";
}

RetrievalConfig RetrievalConfig::parse(const std::string& spec) {
  RetrievalConfig c;
  c.label = spec;
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  if (name == "adaptive") c.strategy = Strategy::kAdaptive;
  else if (name == "static") c.strategy = Strategy::kStatic;
  else if (name == "local") c.strategy = Strategy::kLocal;
  else if (name == "none") c.strategy = Strategy::kNone;
  else fail("--retrieval '{}': unknown strategy '{}' (use adaptive, static, local or none)", spec, name);
  if (colon == std::string::npos) return c;
  for (const auto& [k, v] : parse_spec_params(spec.substr(colon + 1), "--retrieval", spec)) {
    if (k == "topk") c.topk = to_int(spec, k, v);
    else if (k == "csize") c.cluster_size = to_int(spec, k, v);
    else if (k == "sinks") c.sinks = to_int(spec, k, v);
    else if (k == "recent") c.recent = to_int(spec, k, v);
    else if (k == "bmax") c.bmax = to_int(spec, k, v);
    else if (k == "tau_q") c.tau_quantile = to_double(spec, k, v);
    else if (k == "tau_scale") c.tau_scale = to_double(spec, k, v);
    else if (k == "every") c.local_every = to_int(spec, k, v);
    else if (k == "budget") c.budget = to_int(spec, k, v);
    else if (k == "pool") c.pool_pages = to_int(spec, k, v);
    else if (k == "coorder") c.coorder = to_int(spec, k, v) != 0;
    else if (k == "gap") c.gap_pages = to_int(spec, k, v);
    else if (k == "cache_kb") c.cache_kb = to_int(spec, k, v);
    else if (k == "iters") c.kmeans_iterations = to_int(spec, k, v);
    else if (k == "threads") c.threads = static_cast<int>(to_int(spec, k, v));
    else if (k == "direct") c.direct_io = to_int(spec, k, v) != 0;
    else if (k == "async") c.async_io = to_int(spec, k, v) != 0;
    else if (k == "prefetch") c.prefetch = to_int(spec, k, v) != 0;
    else if (k == "label") c.label = v;
    else if (k == "layout") {
      KVC_CHECK(v == "dual" || v == "naive", "--retrieval '{}': layout must be dual or naive, got '{}'", spec, v);
      c.layout = v == "dual" ? Layout::kDualHead : Layout::kNaive;
    } else if (k == "cache") {
      KVC_CHECK(v == "aligned" || v == "lru", "--retrieval '{}': cache must be aligned or lru, got '{}'", spec, v);
      c.cache_policy = v == "aligned" ? CachePolicy::kAligned : CachePolicy::kLru;
    } else {
      fail("--retrieval '{}': unknown key '{}' (topk csize sinks recent bmax tau_q tau_scale every budget layout pool "
           "coorder gap cache cache_kb iters threads direct async prefetch label)",
           spec, k);
    }
  }
  KVC_CHECK(c.topk >= 1, "--retrieval '{}': topk must be at least 1", spec);
  KVC_CHECK(c.cluster_size >= 1, "--retrieval '{}': csize must be at least 1", spec);
  KVC_CHECK(c.local_every >= 1, "--retrieval '{}': every must be at least 1", spec);
  KVC_CHECK(!c.prefetch || c.async_io, "--retrieval '{}': prefetch=1 reads on the I/O thread; it needs async=1", spec);
  KVC_CHECK(c.tau_quantile <= 1.0, "--retrieval '{}': tau_q is a quantile in [0, 1]", spec);
  return c;
}

std::string RetrievalConfig::name() const { return label.empty() ? strategy_name(strategy) : label; }

}  // namespace kvc::retrieval
