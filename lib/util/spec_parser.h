#pragma once
// The NAME:key=val,... grammar shared by --press, --lowrank and --retrieval (and kvc-cluster -s), so
// the three agree on what is an error: an empty list after ':', an item without '=', a repeated key.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kvc {

using SpecParams = std::vector<std::pair<std::string, std::string>>;  // in the order given

// "key=val,key2=val2" -> {{key, val}, {key2, val2}}, items trimmed. `flag` and `spec` name the
// command-line input in errors (e.g. "--press", "snapkv:window=2,window=3").
SpecParams parse_spec_params(const std::string& list, const std::string& flag, const std::string& spec);

struct NamedSpec {
  std::string name;
  SpecParams params;
};

// "NAME" or "NAME:key=val,...", split at the first ':'.
NamedSpec parse_named_spec(const std::string& text, const std::string& flag);

// Typed, checked access to parsed items, shared by --press, --lowrank and --retrieval: a malformed
// value or an unknown key is a one-line kvc::Error naming the flag, the spec and the key.
class SpecValues {
 public:
  SpecValues(SpecParams params, std::string flag, std::string spec);

  bool has(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  int64_t get_count(const std::string& key, int64_t fallback) const;  // >= 0
  double get_number(const std::string& key, double fallback) const;   // finite
  double get_nonnegative(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // One of `choices`, else an error listing them.
  std::string get_choice(const std::string& key, const std::string& fallback,
                         const std::vector<std::string>& choices) const;
  // Keys outside `known` (typos must not pass silently).
  void check_known_keys(const std::vector<std::string>& known) const;

 private:
  const std::string* find(const std::string& key) const;
  SpecParams params_;
  std::string flag_, spec_;
};

}  // namespace kvc
