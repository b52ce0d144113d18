#include "cache/cache_types.h"

#include "util/error.h"

namespace kvc {

CacheTypes CacheTypes::resolved(at::ScalarType activations) const {
  return {keys == at::ScalarType::Undefined ? activations : keys,
          values == at::ScalarType::Undefined ? activations : values};
}

at::ScalarType parse_cache_type(const std::string& name, const std::string& flag) {
  if (name == "auto") return at::ScalarType::Undefined;
  if (name == "f32") return at::kFloat;
  if (name == "f16") return at::kHalf;
  if (name == "bf16") return at::kBFloat16;
  fail("{}: unknown cache type '{}' (expected f32, f16 or bf16)", flag, name);
}

std::string cache_type_name(at::ScalarType type) {
  switch (type) {
    case at::kFloat: return "f32";
    case at::kHalf: return "f16";
    case at::kBFloat16: return "bf16";
    case at::kDouble: return "f64";
    default: return c10::toString(type);
  }
}

}  // namespace kvc
