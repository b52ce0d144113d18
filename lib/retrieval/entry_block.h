#pragma once
// A run of KV entries of one KV head, in plain arrays: rotated keys [n, d], values [n, d] and token
// positions [n]. The unit the store writes, the RAM cache holds and clustering works on.
#include <cstdint>
#include <vector>

namespace kvc::retrieval {

struct EntryBlock {
  int64_t dim = 0;
  std::vector<float> keys, values;
  std::vector<int64_t> positions;

  EntryBlock() = default;
  explicit EntryBlock(int64_t d) : dim(d) {}
  int64_t size() const { return static_cast<int64_t>(positions.size()); }
  bool empty() const { return positions.empty(); }
  const float* key(int64_t i) const { return keys.data() + i * dim; }
  const float* value(int64_t i) const { return values.data() + i * dim; }
  void push(const float* k, const float* v, int64_t pos) {
    keys.insert(keys.end(), k, k + dim);
    values.insert(values.end(), v, v + dim);
    positions.push_back(pos);
  }
  void push_from(const EntryBlock& other, int64_t i) { push(other.key(i), other.value(i), other.positions[i]); }
  void append(const EntryBlock& other) {
    keys.insert(keys.end(), other.keys.begin(), other.keys.end());
    values.insert(values.end(), other.values.begin(), other.values.end());
    positions.insert(positions.end(), other.positions.begin(), other.positions.end());
  }
  void clear() {
    keys.clear();
    values.clear();
    positions.clear();
  }
};

}  // namespace kvc::retrieval
