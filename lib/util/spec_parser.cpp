#include "util/spec_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "util/checked_number.h"
#include "util/error.h"
#include "util/trim.h"

namespace kvc {
namespace {

// Spec items are trimmed of spaces and tabs only.
constexpr const char* kSpaces = " \t";

}  // namespace

SpecParams parse_spec_params(const std::string& list, const std::string& flag, const std::string& spec) {
  // A spec's text becomes a label in CSV rows, gnuplot scripts and tables: a line break or escape
  // sequence there would split a row or a command, so none is taken.
  KVC_CHECK(
      std::none_of(spec.begin(), spec.end(), [](char c) { return (c >= 0 && c < 0x20 && c != '\t') || c == 0x7f; }),
      "{} '{}': control characters (line breaks, escapes) are not allowed in a spec", flag, spec);
  KVC_CHECK(!trim(list, kSpaces).empty(),
            "{} '{}': empty parameter list after ':'; drop the ':' or add key=value items", flag, spec);
  SpecParams params;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    const std::string item = trim(list.substr(start, comma - start), kSpaces);
    KVC_CHECK(!item.empty(), "{} '{}': empty item between commas", flag, spec);
    const size_t eq = item.find('=');
    KVC_CHECK(eq != std::string::npos && eq > 0, "{} '{}': expected key=value, got '{}'", flag, spec, item);
    const std::string key = trim(item.substr(0, eq), kSpaces);
    for (const auto& [seen, value] : params) {
      KVC_CHECK(seen != key, "{} '{}': key '{}' is given twice; keep one", flag, spec, key);
    }
    params.emplace_back(key, trim(item.substr(eq + 1), kSpaces));
    start = comma + 1;
  }
  return params;
}

NamedSpec parse_named_spec(const std::string& text, const std::string& flag) {
  NamedSpec spec;
  const size_t colon = text.find(':');
  spec.name = trim(text.substr(0, colon), kSpaces);
  if (colon != std::string::npos) spec.params = parse_spec_params(text.substr(colon + 1), flag, text);
  return spec;
}

SpecValues::SpecValues(SpecParams params, std::string flag, std::string spec)
    : params_(std::move(params)), flag_(std::move(flag)), spec_(std::move(spec)) {}

const std::string* SpecValues::find(const std::string& key) const {
  for (const auto& [k, v] : params_)
    if (k == key) return &v;
  return nullptr;
}

bool SpecValues::has(const std::string& key) const { return find(key) != nullptr; }

int64_t SpecValues::get_int(const std::string& key, int64_t fallback) const {
  const std::string* v = find(key);
  if (v == nullptr) return fallback;
  const auto x = parse_integer(*v);
  KVC_CHECK(x.has_value(), "{} '{}': {}={} is not an integer", flag_, spec_, key, *v);
  return *x;
}

int64_t SpecValues::get_count(const std::string& key, int64_t fallback) const {
  const std::string* v = find(key);
  if (v == nullptr) return fallback;
  const auto x = parse_integer(*v);
  KVC_CHECK(x.has_value() && *x >= 0, "{} '{}': {}={} is not a non-negative integer", flag_, spec_, key, *v);
  return *x;
}

double SpecValues::get_number(const std::string& key, double fallback) const {
  const std::string* v = find(key);
  if (v == nullptr) return fallback;
  const auto x = parse_finite_number(*v);
  KVC_CHECK(x.has_value(), "{} '{}': {}={} is not a number", flag_, spec_, key, *v);
  return *x;
}

double SpecValues::get_nonnegative(const std::string& key, double fallback) const {
  const double x = get_number(key, fallback);
  KVC_CHECK(x >= 0, "{} '{}': {}={} is not a non-negative number", flag_, spec_, key, *find(key));
  return x;
}

std::string SpecValues::get_string(const std::string& key, const std::string& fallback) const {
  const std::string* v = find(key);
  return v == nullptr ? fallback : *v;
}

std::string SpecValues::get_choice(const std::string& key, const std::string& fallback,
                                   const std::vector<std::string>& choices) const {
  const std::string v = get_string(key, fallback);
  KVC_CHECK(std::find(choices.begin(), choices.end(), v) != choices.end(), "{} '{}': {} must be {}, got '{}'", flag_,
            spec_, key, fmt::join(choices, " or "), v);
  return v;
}

void SpecValues::check_known_keys(const std::vector<std::string>& known) const {
  for (const auto& [key, value] : params_) {
    KVC_CHECK(std::find(known.begin(), known.end(), key) != known.end(), "{} '{}': unknown parameter '{}' (known: {})",
              flag_, spec_, key, fmt::join(known, ", "));
  }
}

}  // namespace kvc
