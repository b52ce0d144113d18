#pragma once
// A uniform draw in [0, 1) keyed on (seed, layer, head, position): what the random press scores and CaM's
// merges draw, with no global RNG state, so a run repeats exactly (splitmix64 chained over the keys).
#include <cstdint>

namespace kvc {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline double keyed_draw(uint64_t seed, int64_t layer, int64_t head, int64_t position) {
  const uint64_t key =
      splitmix64(splitmix64(splitmix64(seed ^ static_cast<uint64_t>(layer)) ^ static_cast<uint64_t>(head)) ^
                 static_cast<uint64_t>(position));
  return static_cast<double>(key >> 11) / 9007199254740992.0;  // 53 bits
}

}  // namespace kvc
