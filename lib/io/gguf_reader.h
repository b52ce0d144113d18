#pragma once
// The GGUF container (llama.cpp's model file), version 2 and 3, read from a read-only mapping:
//   "GGUF" | u32 version | u64 tensor count | u64 metadata count | metadata key/values
//   | tensor infos (name, dims, ggml type, offset) | padding to general.alignment | tensor data
// Every count and length is checked against the bytes left before anything is allocated; every
// malformed input is a one-line kvc::Error naming the file and the key or tensor at fault.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace kvc::gguf {

enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};
const char* value_type_name(ValueType type);

// A ggml tensor type's block: `block_elements` values stored in `block_bytes` bytes.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  uint32_t block_elements;
  uint32_t block_bytes;
};
// nullptr for an id that no ggml release defines (or one that was retired).
const GgmlTypeInfo* ggml_type_info(uint32_t type);

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> shape;  // ggml order: shape[0] is the contiguous dimension
  uint32_t type = 0;            // ggml type id; ggml_type_info(type) describes it
  uint64_t offset = 0;          // within the data region
  uint64_t nbytes = 0;
  const uint8_t* data = nullptr;  // into the mapping; lives as long as the GgufFile; null from open_metadata
  uint64_t elements() const;
};

struct Value {
  ValueType type = ValueType::U8;
  ValueType element_type = ValueType::U8;  // arrays only
  // Scalars: integers and bools in `integer` (u64 above INT64_MAX kept in `unsigned_integer`), floats in `real`.
  int64_t integer = 0;
  uint64_t unsigned_integer = 0;
  double real = 0;
  std::string text;
  // Arrays, by element kind.
  std::vector<std::string> strings;
  std::vector<int64_t> integers;
  std::vector<double> reals;
  uint64_t count = 0;  // array length
};

class GgufFile {
 public:
  static constexpr uint64_t kDefaultAlignment = 32;

  static std::shared_ptr<GgufFile> open(const std::string& path);  // validates everything
  // Header, metadata and tensor infos only, validated as strictly, without requiring the tensor data to
  // be in the file (llama.cpp's vocab-only read): what a tokenizer needs, e.g. from the first chunk of
  // a split download. Tensors of such a file have no data (TensorInfo::data is null).
  static std::shared_ptr<GgufFile> open_metadata(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }

  bool has(const std::string& key) const { return metadata_.count(key) != 0; }
  const std::map<std::string, Value>& metadata() const { return metadata_; }
  // Throw "'<path>': metadata key '<key>' is missing" or "... is <type>, expected <type>". Integer
  // getters accept any integer type whose value fits.
  std::string get_string(const std::string& key) const;
  uint32_t get_u32(const std::string& key) const;
  int32_t get_i32(const std::string& key) const;
  uint64_t get_u64(const std::string& key) const;
  float get_f32(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::vector<std::string>& get_string_array(const std::string& key) const;
  const std::vector<int64_t>& get_int_array(const std::string& key) const;
  const std::vector<double>& get_float_array(const std::string& key) const;

  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo& tensor(const std::string& name) const;  // throws naming the tensor
  bool has_tensor(const std::string& name) const { return tensor_index_.count(name) != 0; }
  uint64_t file_size() const { return mapping_.size(); }

 private:
  GgufFile(const std::string& path, bool needs_tensor_data);
  const Value& value(const std::string& key) const;
  int64_t checked_integer(const std::string& key, int64_t lo, int64_t hi, const char* wanted) const;

  std::string path_;
  st::MappedFile mapping_;
  uint32_t version_ = 0;
  uint64_t alignment_ = kDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::map<std::string, Value> metadata_;
  std::vector<TensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

// Whether the model and tokenizer loaders read `path` as one GGUF file: a file (not a folder) named
// NAME.gguf, or any file that starts with the GGUF magic (downloads are not always named .gguf). Says
// nothing of the rest of its contents; GgufFile::open checks those.
bool is_gguf_file(const std::string& path);

}  // namespace kvc::gguf
