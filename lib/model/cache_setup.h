#pragma once
// How a run builds (and compresses) its caches: the one thing tools and evaluations receive from the
// compression flags. The default is the uncompressed dense cache; a method provides a layer factory
// (its storage layout), an observer (it acts on the cache inside the forward pass), or both.
#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cache/kv_cache.h"
#include "model/forward_observer.h"
#include "model/llama_model.h"

namespace kvc {

// What an observer needs the cache layout to support (LayerCache capabilities); build_cache_setup
// checks it against the layers the factory makes, so an impossible combination fails before any run.
struct LayoutNeeds {
  bool per_head_lengths = false;  // heads keep different numbers of entries
  bool merge = false;             // evicted entries are folded into kept ones
  bool read_rows = false;         // the press reads every cached key and value back (rescoring while decoding)
};

struct CacheSetup {
  std::string name = "none";
  // The layer factory of each new cache (called once per cache, so a layout with state per cache, a
  // store file per sequence, starts fresh); empty: the model's dense cache.
  std::function<LayerCacheFactory()> layout;
  std::function<std::unique_ptr<ForwardObserver>()> make_observer;  // empty: no observer; one per sequence
  bool bounded = false;  // RAM stays within a fixed size while decoding (eviction, or a cache on storage)
  // Picks the entries each new token attends to (retrieval): a pass of several tokens attends to every
  // entry, so only a one-token schedule measures it.
  bool selects_per_token = false;
  std::function<std::string()> report;          // one line about the last cache (e.g. storage reads); may be empty
  std::function<nlohmann::json()> report_json;  // the same as fields for --json; may be empty
  LayoutNeeds needs;
  // The reference of a comparison: the dense cache at full precision, whatever the model's cache types.
  bool full_precision = false;
  // The dense cache's element types for this setup alone (a typed row of a sweep; no factory); both
  // Undefined: the model's cache types.
  CacheTypes cache_types;

  KVCache new_cache(const LlamaModel& model) const {
    if (full_precision) return model.full_precision_cache();
    if (layout) return model.new_cache(layout());
    return typed() ? model.typed_cache(cache_types) : model.new_cache();
  }
  bool typed() const { return cache_types.keys != at::ScalarType::Undefined; }
  // The element types of the dense layers this setup's caches hold.
  CacheTypes dense_cache_types(const LlamaModel& model) const {
    if (full_precision) return {model.dtype(), model.dtype()};
    return typed() ? cache_types : model.cache_types();
  }
  std::unique_ptr<ForwardObserver> new_observer() const { return make_observer ? make_observer() : nullptr; }
  bool has_layout() const { return static_cast<bool>(layout); }
  // A layout whose every cache is made by the same factory.
  void set_layer_factory(LayerCacheFactory factory) {
    layout = [factory = std::move(factory)] { return factory; };
  }
  // Names a layout whose prefill fills every layer the same whatever the observer does after it (the
  // observer only removes entries): setups with the same name may share one prefill. Empty: a layout
  // that runs its own prefill (or none).
  std::string shared_prefill_layout;
};

}  // namespace kvc
