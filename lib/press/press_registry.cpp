#include "press/press_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <mutex>

#include "util/error.h"
#include "util/spec_parser.h"

namespace kvc {
namespace {

std::vector<PressEntry>& entries() {
  static std::vector<PressEntry> list;
  return list;
}

void ensure_builtins() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_press({"none", "no compression (the exact cache)", [](const PressParams& p, const LlamaModel&) {
                      KVC_CHECK(p.ratio == 0 && p.budget == 0, "--press none keeps everything; drop --ratio/--budget");
                      return CacheSetup{};
                    }});
    register_builtin_presses();
  });
}

}  // namespace

PressParams PressParams::parse(const std::string& text) {
  const NamedSpec spec = parse_named_spec(text, "--press");
  PressParams p;
  p.name = spec.name;
  KVC_CHECK(!p.name.empty(), "--press: empty method name (try --press none, or see --list-presses)");
  for (const auto& [key, value] : spec.params) p.values[key] = value;
  return p;
}

SpecValues PressParams::typed() const { return SpecValues(SpecParams(values.begin(), values.end()), "--press", name); }

double PressParams::get_double(const std::string& key, double fallback) const {
  return typed().get_number(key, fallback);
}

int64_t PressParams::get_int(const std::string& key, int64_t fallback) const { return typed().get_int(key, fallback); }

std::string PressParams::get_string(const std::string& key, const std::string& fallback) const {
  return typed().get_string(key, fallback);
}

void PressParams::check_known_keys(const std::vector<std::string>& known) const { typed().check_known_keys(known); }

void register_press(PressEntry entry) {
  for (const auto& e : entries()) KVC_CHECK(e.name != entry.name, "press '{}' registered twice", entry.name);
  entries().push_back(std::move(entry));
}

const std::vector<PressEntry>& registered_presses() {
  ensure_builtins();
  return entries();
}

bool press_needs_file(const std::string& name) {
  for (const auto& e : registered_presses())
    if (e.name == name) return e.needs_file;
  return false;
}

bool press_sizes_itself(const std::string& name) {
  for (const auto& e : registered_presses())
    if (e.name == name) return e.sizes_itself;
  return false;
}

bool press_spec_sizes_itself(const std::string& spec) {
  const PressParams p = PressParams::parse(spec);
  for (const auto& e : registered_presses())
    if (e.name == p.name) return e.sizes_itself && (e.sizing_key.empty() || p.values.count(e.sizing_key) > 0);
  return false;
}

std::vector<std::string> press_names() {
  std::vector<std::string> names;
  for (const auto& e : registered_presses()) names.push_back(e.name);
  return names;
}

CacheSetup make_press_setup(const PressParams& params, const LlamaModel& model) {
  for (const auto& e : registered_presses()) {
    if (e.name == params.name) {
      CacheSetup setup = e.factory(params, model);
      if (setup.name == "none" && params.name != "none") setup.name = params.name;
      return setup;
    }
  }
  fail_unknown_press(params.name);
}

void fail_unknown_press(const std::string& name) {
  fail("--press: unknown method '{}' (known: {}; --list-presses describes them)", name, fmt::join(press_names(), ", "));
}

}  // namespace kvc
