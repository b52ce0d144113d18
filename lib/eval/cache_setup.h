#pragma once
// How an evaluation run builds (and compresses) its cache. The default is the uncompressed dense
// cache; compression methods provide a layer factory and/or an observer that acts on the cache.
#include <functional>
#include <memory>
#include <string>

#include "cache/kv_cache.h"
#include "model/forward_observer.h"
#include "model/llama_model.h"

namespace kvc {

// What an observer needs the cache layout to support (LayerCache capabilities); build_cache_setup
// checks it against the layers the factory makes, so an impossible combination fails before any run.
struct LayoutNeeds {
  bool per_head_lengths = false;  // heads keep different numbers of entries
  bool merge = false;             // evicted entries are folded into kept ones
};

struct CacheSetup {
  std::string name = "none";
  LayerCacheFactory factory;                                         // empty: the model's dense cache
  std::function<std::unique_ptr<ForwardObserver>()> make_observer;  // empty: no observer; one per sequence
  bool bounded = false;  // the observer evicts while decoding: the cache stays within a fixed size
  LayoutNeeds needs;

  KVCache new_cache(const LlamaModel& model) const { return factory ? model.new_cache(factory) : model.new_cache(); }
  std::unique_ptr<ForwardObserver> new_observer() const { return make_observer ? make_observer() : nullptr; }
};

}  // namespace kvc
