#pragma once
// The NAME:key=val,... grammar shared by --press, --lowrank and --retrieval (and kvc-cluster -s), so
// the three agree on what is an error: an empty list after ':', an item without '=', a repeated key.
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

}  // namespace kvc
