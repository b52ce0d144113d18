#pragma once
// Registry of token-eviction methods ("presses"): a name maps to a factory that builds the cache
// setup for given parameters. Families register themselves in register_builtin_presses().
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/cache_setup.h"
#include "model/llama_model.h"
#include "util/spec_parser.h"

namespace kvc {

// "snapkv:window=32,kernel=5" -> name "snapkv", params {window: "32", kernel: "5"}.
struct PressParams {
  std::string name;
  std::map<std::string, std::string> values;
  double ratio = 0.0;
  int64_t budget = 0;
  std::string budgets_file;

  static PressParams parse(const std::string& text);
  // Typed access; throws kvc::Error naming the press and key on a malformed value.
  double get_double(const std::string& key, double fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // Errors on keys the press does not know (typos must not pass silently).
  void check_known_keys(const std::vector<std::string>& known) const;
  // The shared checked access (util/spec_parser.h) over `values`.
  SpecValues typed() const;
};

using PressFactory = std::function<CacheSetup(const PressParams&, const LlamaModel&)>;

struct PressEntry {
  std::string name;
  std::string description;
  PressFactory factory;
  // The method decides how much it keeps by its own parameters (a threshold, a share of channels or heads):
  // it runs without --ratio or --budget.
  bool sizes_itself = false;
  // The parameter a self-sizing method sizes itself by when it can also be sized by --ratio or --budget
  // (duo_attention's streaming=): a spec without it takes a ratio. Empty: it always sizes itself.
  std::string sizing_key;
  // The method runs only with a file made for the model (LU-KV's curve=): left out of what runs every
  // method (kvc-eval sweep --methods all).
  bool needs_file = false;
};

void register_press(PressEntry entry);
const std::vector<PressEntry>& registered_presses();
std::vector<std::string> press_names();
// Whether the named method runs without --ratio or --budget (PressEntry::sizes_itself); false for unknown names.
bool press_sizes_itself(const std::string& name);
// Whether a spec NAME[:key=val,...] sizes itself: its method sizes itself and, where a ratio can size it instead
// (PressEntry::sizing_key), the spec gives that parameter. A sweep gives such a spec one cell, any other a cell
// per ratio.
bool press_spec_sizes_itself(const std::string& spec);
// Whether the named method needs a file made for the model (PressEntry::needs_file); false for unknown names.
bool press_needs_file(const std::string& name);
// Throws kvc::Error listing the known names.
CacheSetup make_press_setup(const PressParams& params, const LlamaModel& model);
// The one "unknown method" error, naming every registered method.
[[noreturn]] void fail_unknown_press(const std::string& name);

// Defined by the eviction family (lib/press/); called once before the first lookup.
void register_builtin_presses();

}  // namespace kvc
