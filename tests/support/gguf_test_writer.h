#pragma once
// Builds GGUF files byte by byte for tests: valid ones, and broken ones by editing the fields.
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kvc::test {

class GgufTestWriter {
 public:
  uint32_t version = 3;
  uint64_t alignment = 32;  // written as general.alignment only when set_alignment_key is true
  bool set_alignment_key = false;

  void add_string(const std::string& key, const std::string& value) {
    kv(key, 8);
    str(meta_, value);
    ++kv_count_;
  }
  void add_u32(const std::string& key, uint32_t value) { scalar(key, 4, value); }
  void add_i32(const std::string& key, int32_t value) { scalar(key, 5, value); }
  void add_f32(const std::string& key, float value) { scalar(key, 6, value); }
  void add_bool(const std::string& key, bool value) { scalar(key, 7, static_cast<uint8_t>(value)); }
  void add_u64(const std::string& key, uint64_t value) { scalar(key, 10, value); }
  void add_string_array(const std::string& key, const std::vector<std::string>& values) {
    kv(key, 9);
    put<uint32_t>(meta_, 8);
    put<uint64_t>(meta_, values.size());
    for (const auto& v : values) str(meta_, v);
    ++kv_count_;
  }
  void add_i32_array(const std::string& key, const std::vector<int32_t>& values) {
    kv(key, 9);
    put<uint32_t>(meta_, 5);
    put<uint64_t>(meta_, values.size());
    for (int32_t v : values) put<int32_t>(meta_, v);
    ++kv_count_;
  }
  void add_f32_array(const std::string& key, const std::vector<float>& values) {
    kv(key, 9);
    put<uint32_t>(meta_, 6);
    put<uint64_t>(meta_, values.size());
    for (float v : values) put<float>(meta_, v);
    ++kv_count_;
  }
  // A tensor whose bytes follow at `offset` in the data region (aligned by the caller); `bytes` may be
  // shorter or longer than the type needs, to build broken files.
  void add_tensor(const std::string& name, const std::vector<uint64_t>& shape, uint32_t type, uint64_t offset,
                  const std::string& bytes) {
    str(infos_, name);
    put<uint32_t>(infos_, static_cast<uint32_t>(shape.size()));
    for (uint64_t d : shape) put<uint64_t>(infos_, d);
    put<uint32_t>(infos_, type);
    put<uint64_t>(infos_, offset);
    if (data_.size() < offset) data_.resize(offset, '\0');
    data_.replace(offset, bytes.size(), bytes);
    ++tensor_count_;
  }

  std::string build() const {
    std::string out;
    put<uint32_t>(out, 0x46554747);
    put<uint32_t>(out, version);
    put<uint64_t>(out, tensor_count_);
    std::string meta = meta_;
    uint64_t kvs = kv_count_;
    if (set_alignment_key) {
      str(meta, "general.alignment");
      put<uint32_t>(meta, 4);
      put<uint32_t>(meta, static_cast<uint32_t>(alignment));
      ++kvs;
    }
    put<uint64_t>(out, kvs);
    out += meta;
    out += infos_;
    if (tensor_count_ > 0) {
      while (out.size() % alignment != 0) out += '\0';
      out += data_;
    }
    return out;
  }

  template <typename T>
  static void put(std::string& out, T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));
    out.append(bytes, sizeof(T));
  }
  static void str(std::string& out, const std::string& s) {
    put<uint64_t>(out, s.size());
    out += s;
  }

 private:
  void kv(const std::string& key, uint32_t type) {
    str(meta_, key);
    put<uint32_t>(meta_, type);
  }
  template <typename T>
  void scalar(const std::string& key, uint32_t type, T value) {
    kv(key, type);
    put<T>(meta_, value);
    ++kv_count_;
  }

  std::string meta_, infos_, data_;
  uint64_t kv_count_ = 0, tensor_count_ = 0;
};

}  // namespace kvc::test
