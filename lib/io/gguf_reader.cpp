#include "io/gguf_reader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "util/error.h"
#include "util/files.h"

namespace kvc::gguf {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr uint32_t kMaxDims = 4;         // GGML_MAX_DIMS

// Block sizes as ggml defines them; retired ids (4, 5, 31-33, 36-38) are absent on purpose.
constexpr GgmlTypeInfo kTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},      {3, "Q4_1", 32, 20},
    {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},      {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},
    {10, "Q2_K", 256, 84},    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66}, {17, "IQ2_XS", 256, 74},
    {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},   {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},
    {22, "IQ2_S", 256, 82},   {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},        {29, "IQ1_M", 256, 56},
    {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},   {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},
};

// Bytes one element of a metadata type takes at least (strings: their u64 length).
uint64_t min_value_bytes(ValueType type) {
  switch (type) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::BOOL: return 1;
    case ValueType::U16:
    case ValueType::I16: return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32: return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
    case ValueType::STRING: return 8;
    case ValueType::ARRAY: return 12;  // element type + count
  }
  return 1;
}

bool known_value_type(uint32_t raw) { return raw <= static_cast<uint32_t>(ValueType::F64); }

bool is_integer(ValueType t) {
  return t == ValueType::U8 || t == ValueType::I8 || t == ValueType::U16 || t == ValueType::I16 ||
         t == ValueType::U32 || t == ValueType::I32 || t == ValueType::U64 || t == ValueType::I64;
}

// Reads little-endian fields in order, each checked against the end of the file.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, uint64_t size) : path_(path), data_(data), size_(size) {}

  uint64_t position() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  void need(uint64_t bytes, const std::string& what) const {
    KVC_CHECK(bytes <= left(), "'{}': truncated: {} needs {} bytes at offset {} but the file ends at {}", path_, what,
              bytes, pos_, size_);
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));  // x86/ARM hosts are little-endian, as the format
    pos_ += sizeof(T);
    return value;
  }
  std::string read_string(const std::string& what) {
    const uint64_t length = read<uint64_t>(what + " length");
    KVC_CHECK(length <= left(), "'{}': {} has length {} at offset {}, past the end of the file ({} bytes)", path_, what,
              length, pos_ - 8, size_);
    std::string text(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return text;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

int64_t read_integer(Cursor& c, ValueType type, const std::string& what, uint64_t* as_unsigned) {
  int64_t v = 0;
  switch (type) {
    case ValueType::U8: v = c.read<uint8_t>(what); break;
    case ValueType::I8: v = c.read<int8_t>(what); break;
    case ValueType::U16: v = c.read<uint16_t>(what); break;
    case ValueType::I16: v = c.read<int16_t>(what); break;
    case ValueType::U32: v = c.read<uint32_t>(what); break;
    case ValueType::I32: v = c.read<int32_t>(what); break;
    case ValueType::I64: v = c.read<int64_t>(what); break;
    case ValueType::U64: {
      const uint64_t u = c.read<uint64_t>(what);
      *as_unsigned = u;
      return static_cast<int64_t>(u);
    }
    default: break;
  }
  *as_unsigned = static_cast<uint64_t>(v);
  return v;
}

Value read_value(Cursor& c, ValueType type, const std::string& path, const std::string& what) {
  Value value;
  value.type = type;
  if (is_integer(type)) {
    value.integer = read_integer(c, type, what, &value.unsigned_integer);
  } else if (type == ValueType::BOOL) {
    const uint8_t b = c.read<uint8_t>(what);
    KVC_CHECK(b <= 1, "'{}': {} is a bool holding {}", path, what, b);
    value.integer = b;
  } else if (type == ValueType::F32) {
    value.real = c.read<float>(what);
  } else if (type == ValueType::F64) {
    value.real = c.read<double>(what);
  } else if (type == ValueType::STRING) {
    value.text = c.read_string(what);
  } else {  // ARRAY
    const uint32_t raw = c.read<uint32_t>(what + " element type");
    KVC_CHECK(known_value_type(raw), "'{}': {} is an array of unknown type {}", path, what, raw);
    const auto element = static_cast<ValueType>(raw);
    KVC_CHECK(element != ValueType::ARRAY, "'{}': {} is an array of arrays, which GGUF readers do not support", path,
              what);
    value.element_type = element;
    value.count = c.read<uint64_t>(what + " count");
    // Bound the count by the bytes left before allocating anything for it.
    KVC_CHECK(value.count <= c.left() / min_value_bytes(element),
              "'{}': {} claims {} elements of {} but only {} bytes are left", path, what, value.count,
              value_type_name(element), c.left());
    for (uint64_t i = 0; i < value.count; ++i) {
      const std::string item = fmt::format("{}[{}]", what, i);
      if (element == ValueType::STRING) {
        value.strings.push_back(c.read_string(item));
      } else if (element == ValueType::F32 || element == ValueType::F64) {
        value.reals.push_back(element == ValueType::F32 ? c.read<float>(item) : c.read<double>(item));
      } else {
        Value scalar = read_value(c, element, path, item);
        value.integers.push_back(scalar.integer);
      }
    }
  }
  return value;
}

}  // namespace

const char* value_type_name(ValueType type) {
  static const char* const kNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                       "bool", "string", "array", "u64", "i64", "f64"};
  const auto index = static_cast<uint32_t>(type);
  return index < sizeof kNames / sizeof kNames[0] ? kNames[index] : "unknown";
}

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const auto& info : kTypes)
    if (info.id == type) return &info;
  return nullptr;
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<GgufFile> GgufFile::open(const std::string& path) {
  return std::shared_ptr<GgufFile>(new GgufFile(path, true));
}

std::shared_ptr<GgufFile> GgufFile::open_metadata(const std::string& path) {
  return std::shared_ptr<GgufFile>(new GgufFile(path, false));
}

GgufFile::GgufFile(const std::string& path, bool needs_tensor_data) : path_(path), mapping_(path) {
  Cursor c(path_, mapping_.data(), mapping_.size());
  KVC_CHECK(mapping_.size() >= 4, "'{}': file too short for a GGUF header ({} bytes)", path_, mapping_.size());
  const uint32_t magic = c.read<uint32_t>("magic");
  KVC_CHECK(magic == kMagic, "'{}': not a GGUF file (magic {:02x} {:02x} {:02x} {:02x}, expected 'GGUF')", path_,
            magic & 0xFF, (magic >> 8) & 0xFF, (magic >> 16) & 0xFF, magic >> 24);
  version_ = c.read<uint32_t>("version");
  KVC_CHECK(version_ == 2 || version_ == 3, "'{}': GGUF version {} is not supported (2 or 3)", path_, version_);
  const uint64_t tensor_count = c.read<uint64_t>("tensor count");
  const uint64_t kv_count = c.read<uint64_t>("metadata count");
  // Smallest key/value: empty key (8) + type (4) + a u8 (1); smallest tensor info: 8 + 4 + 4 + 8.
  KVC_CHECK(kv_count <= c.left() / 13, "'{}': metadata count {} cannot fit in the {} bytes left", path_, kv_count,
            c.left());

  for (uint64_t i = 0; i < kv_count; ++i) {
    const std::string key = c.read_string(fmt::format("metadata key #{}", i));
    const std::string what = fmt::format("metadata '{}'", key);
    const uint32_t raw = c.read<uint32_t>(what + " type");
    KVC_CHECK(known_value_type(raw), "'{}': {} has unknown value type {}", path_, what, raw);
    KVC_CHECK(metadata_.count(key) == 0, "'{}': metadata key '{}' appears twice", path_, key);
    metadata_.emplace(key, read_value(c, static_cast<ValueType>(raw), path_, what));
  }
  if (has("general.alignment")) {
    alignment_ = get_u32("general.alignment");
    KVC_CHECK(alignment_ > 0 && (alignment_ & (alignment_ - 1)) == 0,
              "'{}': general.alignment {} is not a power of two", path_, alignment_);
  }

  KVC_CHECK(tensor_count <= c.left() / 24, "'{}': tensor count {} cannot fit in the {} bytes left", path_, tensor_count,
            c.left());
  tensors_.reserve(tensor_count);
  for (uint64_t i = 0; i < tensor_count; ++i) {
    TensorInfo t;
    t.name = c.read_string(fmt::format("tensor #{} name", i));
    const std::string what = fmt::format("tensor '{}'", t.name);
    KVC_CHECK(tensor_index_.count(t.name) == 0, "'{}': {} appears twice", path_, what);
    const uint32_t dims = c.read<uint32_t>(what + " dimension count");
    KVC_CHECK(dims >= 1 && dims <= kMaxDims, "'{}': {} has {} dimensions (1 to {})", path_, what, dims, kMaxDims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < dims; ++d) {
      const uint64_t dim = c.read<uint64_t>(what + " shape");
      KVC_CHECK(dim > 0, "'{}': {} has a zero dimension", path_, what);
      KVC_CHECK(!__builtin_mul_overflow(elements, dim, &elements) &&
                    elements <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()),
                "'{}': {} has too many elements (the count overflows)", path_, what);
      t.shape.push_back(dim);
    }
    t.type = c.read<uint32_t>(what + " type");
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    KVC_CHECK(info != nullptr, "'{}': {} has unknown ggml type {}", path_, what, t.type);
    KVC_CHECK(t.shape[0] % info->block_elements == 0,
              "'{}': {} of type {} has {} values per row, not a multiple of its block of {}", path_, what, info->name,
              t.shape[0], info->block_elements);
    t.nbytes = elements / info->block_elements * info->block_bytes;  // < 2^63 / 1 * 292 / 256 cannot overflow
    t.offset = c.read<uint64_t>(what + " offset");
    KVC_CHECK(t.offset % alignment_ == 0, "'{}': {} offset {} is not a multiple of the alignment {}", path_, what,
              t.offset, alignment_);
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  // The data region starts at the next multiple of the alignment after the tensor infos.
  const uint64_t end_of_infos = c.position();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  if (!needs_tensor_data) return;
  KVC_CHECK(tensors_.empty() || data_offset_ <= mapping_.size(),
            "'{}': truncated: the data region would start at {} but the file ends at {}", path_, data_offset_,
            mapping_.size());
  const uint64_t data_size = mapping_.size() > data_offset_ ? mapping_.size() - data_offset_ : 0;
  for (TensorInfo& t : tensors_) {
    KVC_CHECK(t.offset <= data_size && t.nbytes <= data_size - t.offset,
              "'{}': tensor '{}' ({} bytes at data offset {}) runs past the end of the file (data region holds {} "
              "bytes)",
              path_, t.name, t.nbytes, t.offset, data_size);
    t.data = mapping_.data() + data_offset_ + t.offset;
  }
  // Tensors own disjoint byte ranges, as llama.cpp's writer lays them out: two tensors sharing bytes
  // is a damaged or crafted file (one tensor's weights read as another's).
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& before = *by_offset[i - 1];
    const TensorInfo& after = *by_offset[i];
    KVC_CHECK(after.offset >= before.offset + before.nbytes,
              "'{}': tensors '{}' (bytes {} to {}) and '{}' (from byte {}) overlap in the data region", path_,
              before.name, before.offset, before.offset + before.nbytes, after.name, after.offset);
  }
}

const Value& GgufFile::value(const std::string& key) const {
  const auto it = metadata_.find(key);
  KVC_CHECK(it != metadata_.end(), "'{}': metadata key '{}' is missing", path_, key);
  return it->second;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const Value& v, const char* wanted) {
  const std::string have = v.type == ValueType::ARRAY ? fmt::format("an array of {}", value_type_name(v.element_type))
                                                      : std::string(value_type_name(v.type));
  fail("'{}': metadata key '{}' is {}, expected {}", path, key, have, wanted);
}
}  // namespace

int64_t GgufFile::checked_integer(const std::string& key, int64_t lo, int64_t hi, const char* wanted) const {
  const Value& v = value(key);
  if (!is_integer(v.type)) wrong_type(path_, key, v, wanted);
  const bool big_unsigned = v.type == ValueType::U64 && v.unsigned_integer > static_cast<uint64_t>(INT64_MAX);
  KVC_CHECK(!big_unsigned && v.integer >= lo && v.integer <= hi, "'{}': metadata key '{}' = {} does not fit {}", path_,
            key, v.type == ValueType::U64 ? fmt::format("{}", v.unsigned_integer) : fmt::format("{}", v.integer),
            wanted);
  return v.integer;
}

std::string GgufFile::get_string(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::STRING) wrong_type(path_, key, v, "a string");
  return v.text;
}

uint32_t GgufFile::get_u32(const std::string& key) const {
  return static_cast<uint32_t>(checked_integer(key, 0, UINT32_MAX, "a u32"));
}

int32_t GgufFile::get_i32(const std::string& key) const {
  return static_cast<int32_t>(checked_integer(key, INT32_MIN, INT32_MAX, "an i32"));
}

uint64_t GgufFile::get_u64(const std::string& key) const {
  const Value& v = value(key);
  if (v.type == ValueType::U64) return v.unsigned_integer;
  return static_cast<uint64_t>(checked_integer(key, 0, INT64_MAX, "a u64"));
}

float GgufFile::get_f32(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::F32 && v.type != ValueType::F64) wrong_type(path_, key, v, "an f32");
  return static_cast<float>(v.real);
}

bool GgufFile::get_bool(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::BOOL) wrong_type(path_, key, v, "a bool");
  return v.integer != 0;
}

const std::vector<std::string>& GgufFile::get_string_array(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::ARRAY || v.element_type != ValueType::STRING)
    wrong_type(path_, key, v, "an array of string");
  return v.strings;
}

const std::vector<int64_t>& GgufFile::get_int_array(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::ARRAY || !(is_integer(v.element_type) || v.element_type == ValueType::BOOL))
    wrong_type(path_, key, v, "an array of integers");
  return v.integers;
}

const std::vector<double>& GgufFile::get_float_array(const std::string& key) const {
  const Value& v = value(key);
  if (v.type != ValueType::ARRAY || !(v.element_type == ValueType::F32 || v.element_type == ValueType::F64))
    wrong_type(path_, key, v, "an array of floats");
  return v.reals;
}

const TensorInfo& GgufFile::tensor(const std::string& name) const {
  const auto it = tensor_index_.find(name);
  KVC_CHECK(it != tensor_index_.end(), "tensor '{}' not found in '{}'", name, path_);
  return tensors_[it->second];
}

bool is_gguf_file(const std::string& path) {
  if (is_directory(path)) return false;
  if (std::filesystem::path(path).extension() == ".gguf") return true;
  // Only a regular file is opened to look: opening a FIFO would wait for a writer.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, sizeof magic) && std::memcmp(magic, "GGUF", sizeof magic) == 0;
}

}  // namespace kvc::gguf
