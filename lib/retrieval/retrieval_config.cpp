#include "retrieval/retrieval_config.h"

#include <sstream>
#include <utility>
#include <vector>

#include "util/error.h"
#include "util/spec_parser.h"

namespace kvc::retrieval {

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::kAdaptive: return "adaptive";
    case Strategy::kStatic: return "static";
    case Strategy::kLocal: return "local";
    case Strategy::kPQ: return "pq";
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
  else if (name == "pq") c.strategy = Strategy::kPQ;
  else if (name == "none") c.strategy = Strategy::kNone;
  else fail("--retrieval '{}': unknown strategy '{}' (use adaptive, static, local, pq or none)", spec, name);
  if (colon == std::string::npos) return c;
  const SpecValues v(parse_spec_params(spec.substr(colon + 1), "--retrieval", spec), "--retrieval", spec);
  v.check_known_keys({"topk",     "csize",     "sinks",   "recent", "bmax",      "tau_q",    "tau_scale",
                      "every",    "budget",    "layout",  "pool",   "coorder",   "gap",      "cache",
                      "cache_kb", "iters",     "segment", "direct", "async",     "prefetch", "tails",
                      "label",    "subspaces", "bits",    "metric", "centroids", "virtual"});
  c.topk = v.get_count("topk", c.topk);
  c.cluster_size = v.get_count("csize", c.cluster_size);
  c.sinks = v.get_count("sinks", c.sinks);
  c.recent = v.get_count("recent", c.recent);
  c.bmax = v.get_count("bmax", c.bmax);
  c.tau_quantile = v.get_nonnegative("tau_q", c.tau_quantile);
  c.tau_scale = v.get_nonnegative("tau_scale", c.tau_scale);
  c.local_every = v.get_count("every", c.local_every);
  c.budget = v.get_count("budget", c.budget);
  c.pool_pages = v.get_count("pool", c.pool_pages);
  c.coorder = v.get_count("coorder", c.coorder ? 1 : 0) != 0;
  c.gap_pages = v.get_count("gap", c.gap_pages);
  c.cache_kb = v.get_count("cache_kb", c.cache_kb);
  c.kmeans_iterations = v.get_count("iters", c.kmeans_iterations);
  c.segment = v.get_count("segment", c.segment);
  c.direct_io = v.get_count("direct", c.direct_io ? 1 : 0) != 0;
  c.async_io = v.get_count("async", c.async_io ? 1 : 0) != 0;
  c.prefetch = v.get_count("prefetch", c.prefetch ? 1 : 0) != 0;
  c.label = v.get_string("label", c.label);
  c.virtual_cache = v.get_count("virtual", c.virtual_cache ? 1 : 0) != 0;
  c.centroids_on_storage =
      v.get_choice("centroids", c.centroids_on_storage ? "storage" : "ram", {"ram", "storage"}) == "storage";
  c.cosine = v.get_choice("metric", c.cosine ? "cosine" : "l2", {"l2", "cosine"}) == "cosine";
  c.pq_subspaces = v.get_count("subspaces", c.pq_subspaces);
  c.pq_bits = v.get_count("bits", c.pq_bits);
  KVC_CHECK(c.pq_subspaces >= 1, "--retrieval '{}': subspaces must be at least 1", spec);
  KVC_CHECK(c.pq_bits >= 1 && c.pq_bits <= 8, "--retrieval '{}': bits must be in 1..8 (a code is one byte), got {}",
            spec, c.pq_bits);
  const bool dual = c.layout == Layout::kDualHead, aligned = c.cache_policy == CachePolicy::kAligned;
  c.layout =
      v.get_choice("layout", dual ? "dual" : "naive", {"dual", "naive"}) == "dual" ? Layout::kDualHead : Layout::kNaive;
  c.cache_policy = v.get_choice("cache", aligned ? "aligned" : "lru", {"aligned", "lru"}) == "aligned"
                       ? CachePolicy::kAligned
                       : CachePolicy::kLru;
  const std::vector<std::pair<std::string, TailPlacement>> placements = {
      {"small", TailPlacement::kSmallInRam}, {"storage", TailPlacement::kStorage}, {"ram", TailPlacement::kRam}};
  std::string tails_now;
  for (const auto& [name, placement] : placements)
    if (placement == c.tails) tails_now = name;
  const std::string tails = v.get_choice("tails", tails_now, {"small", "storage", "ram"});
  for (const auto& [name, placement] : placements)
    if (name == tails) c.tails = placement;
  KVC_CHECK(c.topk >= 1, "--retrieval '{}': topk must be at least 1", spec);
  KVC_CHECK(c.cluster_size >= 1, "--retrieval '{}': csize must be at least 1", spec);
  KVC_CHECK(c.local_every >= 1, "--retrieval '{}': every must be at least 1", spec);
  KVC_CHECK(!c.prefetch || c.async_io, "--retrieval '{}': prefetch=1 reads on the I/O thread; it needs async=1", spec);
  KVC_CHECK(!c.centroids_on_storage || !picks_entries(c.strategy),
            "--retrieval '{}': {} keeps no centroids (it picks entries, not clusters); centroids=storage is for "
            "adaptive, static and local",
            spec, strategy_name(c.strategy));
  KVC_CHECK(
      !(c.virtual_cache && c.prefetch),
      "--retrieval '{}': virtual=1 reads each layer's cached clusters back ahead of it, and prefetch=1 would read "
      "them a second time; use one of the two",
      spec);
  KVC_CHECK(c.tau_quantile <= 1.0, "--retrieval '{}': tau_q is a quantile in [0, 1]", spec);
  return c;
}

std::string RetrievalConfig::name() const { return label.empty() ? strategy_name(strategy) : label; }

}  // namespace kvc::retrieval
