// DType helpers and the validating safetensors reader.
#include "io/safetensors.h"

#include "io/content_checksum.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "util/error.h"

namespace kvc::st {

using nlohmann::json;

namespace {

struct DTypeEntry {
  DType dtype;
  const char* name;
  size_t size;
};

constexpr DTypeEntry kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4},   {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4},   {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

const DTypeEntry& entry_of(DType dtype) {
  for (const DTypeEntry& entry : kDTypes)
    if (entry.dtype == dtype) return entry;
  throw std::logic_error("kvc::st: DType value outside the enum");
}

constexpr uint64_t kLengthPrefixBytes = 8;

uint64_t read_u64_le(const uint8_t* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | bytes[i];
  return value;
}

// JSON has no unsigned/signed distinction; nlohmann parses non-negative integers as unsigned.
std::optional<uint64_t> as_non_negative_integer(const json& value) {
  if (value.is_number_unsigned()) return value.get<uint64_t>();
  if (value.is_number_integer() && value.get<int64_t>() >= 0) return value.get<uint64_t>();
  return std::nullopt;
}

std::vector<int64_t> parse_shape(const json& shape, const std::string& where) {
  KVC_CHECK(shape.is_array(), "{}: 'shape' is not an array", where);
  std::vector<int64_t> dims;
  for (const json& dim : shape) {
    KVC_CHECK(dim.is_number_integer(), "{}: 'shape' {} holds a non-integer", where, shape.dump());
    KVC_CHECK(dim.is_number_unsigned() || dim.get<int64_t>() >= 0, "{}: 'shape' {} has a negative dim", where,
              shape.dump());
    const uint64_t value = dim.get<uint64_t>();
    KVC_CHECK(value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), "{}: 'shape' {} has a dim too large",
              where, shape.dump());
    dims.push_back(static_cast<int64_t>(value));
  }
  return dims;
}

TensorInfo parse_tensor_entry(const std::string& name, const json& entry, uint64_t data_size, const std::string& path) {
  const std::string where = fmt::format("'{}': tensor '{}'", path, name);
  KVC_CHECK(entry.is_object(), "{}: entry is not a JSON object", where);
  TensorInfo info;
  info.name = name;

  const auto dtype = entry.find("dtype");
  KVC_CHECK(dtype != entry.end(), "{}: missing 'dtype'", where);
  KVC_CHECK(dtype->is_string(), "{}: 'dtype' is not a string", where);
  info.dtype = parse_dtype(dtype->get<std::string>(), where);

  const auto shape = entry.find("shape");
  KVC_CHECK(shape != entry.end(), "{}: missing 'shape'", where);
  info.shape = parse_shape(*shape, where);

  const auto offsets = entry.find("data_offsets");
  KVC_CHECK(offsets != entry.end(), "{}: missing 'data_offsets'", where);
  std::optional<uint64_t> begin, end;
  if (offsets->is_array() && offsets->size() == 2) {
    begin = as_non_negative_integer((*offsets)[0]);
    end = as_non_negative_integer((*offsets)[1]);
  }
  KVC_CHECK(begin && end, "{}: 'data_offsets' {} is not two non-negative integers", where, offsets->dump());
  KVC_CHECK(*begin <= *end, "{}: 'data_offsets' {} has begin > end", where, offsets->dump());
  KVC_CHECK(*end <= data_size, "{}: 'data_offsets' end {} is beyond the data section ({} bytes)", where, *end,
            data_size);
  info.begin = *begin;
  info.end = *end;

  const std::optional<uint64_t> expected = checked_nbytes(info.dtype, info.shape);
  KVC_CHECK(expected.has_value(), "{}: shape [{}] is too large (byte count overflows)", where,
            fmt::join(info.shape, ", "));
  KVC_CHECK(info.end - info.begin == *expected, "{}: 'data_offsets' span {} bytes but shape [{}] of {} needs {}", where,
            info.end - info.begin, fmt::join(info.shape, ", "), dtype_name(info.dtype), *expected);
  return info;
}

}  // namespace

size_t dtype_size(DType dtype) { return entry_of(dtype).size; }

const char* dtype_name(DType dtype) { return entry_of(dtype).name; }

DType parse_dtype(const std::string& name, const std::string& context) {
  for (const DTypeEntry& entry : kDTypes)
    if (name == entry.name) return entry.dtype;
  fail("{}: unknown dtype '{}'", context, name);
}

std::optional<uint64_t> checked_nbytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) return std::nullopt;
  }
  // numel() is an int64_t, so the element count must fit one as well as the byte count.
  if (count > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(count, dtype_size(dtype), &bytes)) return std::nullopt;
  return bytes;
}

int64_t TensorInfo::numel() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

uint64_t TensorInfo::nbytes() const { return static_cast<uint64_t>(numel()) * dtype_size(dtype); }

namespace {

// A file kvc wrote carries kvc.checksum over its header (without that entry, as the writer dumped it)
// and its data; any change after writing, such as a flipped bit in a weight, fails here.
void verify_checksum(const std::string& path, const std::string& unsealed_header, const std::string& recorded,
                     const uint8_t* data, uint64_t data_size) {
  ContentChecksum checksum;
  checksum.update(unsealed_header.data(), unsealed_header.size());
  checksum.update(data, data_size);
  KVC_CHECK(checksum.finish() == recorded,
            "'{}' fails its checksum ({} in its header): the file changed after kvc wrote it (damaged or "
            "edited); make it again",
            path, kChecksumKey);
}

}  // namespace

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  return std::shared_ptr<SafetensorsFile>(new SafetensorsFile(path));
}

SafetensorsFile::SafetensorsFile(const std::string& path) : path_(path), mapping_(path) {
  const uint64_t size = mapping_.size();
  KVC_CHECK(size >= kLengthPrefixBytes,
            "'{}': file too short for a safetensors header length ({} bytes, need at least 8)", path_, size);
  const uint64_t header_length = read_u64_le(mapping_.data());
  KVC_CHECK(header_length > 0, "'{}': header length is 0", path_);
  KVC_CHECK(header_length <= kMaxHeaderBytes, "'{}': header length {} exceeds the {} byte limit", path_, header_length,
            kMaxHeaderBytes);
  KVC_CHECK(header_length <= size - kLengthPrefixBytes,
            "'{}': header length {} runs past the end of the file ({} bytes)", path_, header_length, size);
  const auto* header_begin = reinterpret_cast<const char*>(mapping_.data() + kLengthPrefixBytes);
  data_section_ = mapping_.data() + kLengthPrefixBytes + header_length;
  const std::string unsealed_header =
      parse_header(std::string(header_begin, header_length), size - kLengthPrefixBytes - header_length);
  check_exact_coverage(size - kLengthPrefixBytes - header_length);
  if (metadata_.count(kChecksumKey)) {
    verify_checksum(path_, unsealed_header, metadata_.at(kChecksumKey), data_section_,
                    size - kLengthPrefixBytes - header_length);
    metadata_.erase(kChecksumKey);  // verified; readers of the metadata see what the writer was given
  }
}

std::string SafetensorsFile::parse_header(const std::string& header_text, uint64_t data_size) {
  // nlohmann keeps only the last of repeated keys; a repeated tensor name makes the file ambiguous.
  std::set<std::string> seen_keys;
  std::string repeated_key;
  const json::parser_callback_t note_repeats = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::key && depth == 1 && !seen_keys.insert(parsed.get<std::string>()).second &&
        repeated_key.empty())
      repeated_key = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(header_text, note_repeats);
  } catch (const json::parse_error& e) {
    fail("'{}': header is not valid JSON (syntax error at byte {} of the header)", path_, e.byte);
  } catch (const json::exception& e) {  // e.g. a number too large for any type (out_of_range)
    fail("'{}': header is not valid JSON ({})", path_, e.what());
  }
  KVC_CHECK(header.is_object(), "'{}': header is not a JSON object", path_);
  KVC_CHECK(repeated_key.empty(), "'{}': header has a duplicate key '{}'", path_, repeated_key);

  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      KVC_CHECK(value.is_object(), "'{}': __metadata__ is not a JSON object", path_);
      for (const auto& [meta_key, meta_value] : value.items()) {
        KVC_CHECK(meta_value.is_string(), "'{}': __metadata__ value of '{}' is not a string", path_, meta_key);
        metadata_[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    tensors_.emplace(key, parse_tensor_entry(key, value, data_size, path_));
  }
  if (!metadata_.count(kChecksumKey)) return {};
  // The header as the writer dumped it before sealing: without the checksum entry (and an emptied metadata).
  json& metadata = header["__metadata__"];
  metadata.erase(kChecksumKey);
  if (metadata.empty()) header.erase("__metadata__");
  return header.dump();
}

void SafetensorsFile::check_exact_coverage(uint64_t data_size) const {
  // Empty tensors occupy no bytes, so wherever they point they neither overlap nor cover anything.
  std::vector<const TensorInfo*> by_begin;
  for (const auto& [name, info] : tensors_)
    if (info.end > info.begin) by_begin.push_back(&info);
  std::sort(by_begin.begin(), by_begin.end(),
            [](const TensorInfo* a, const TensorInfo* b) { return a->begin < b->begin; });
  const TensorInfo* previous = nullptr;
  uint64_t covered = 0;  // the data section is covered up to here
  for (const TensorInfo* info : by_begin) {
    KVC_CHECK(info->begin >= covered, "'{}': tensors '{}' [{}, {}) and '{}' [{}, {}) overlap", path_, previous->name,
              previous->begin, previous->end, info->name, info->begin, info->end);
    KVC_CHECK(info->begin == covered, "'{}': data bytes [{}, {}) before tensor '{}' belong to no tensor", path_,
              covered, info->begin, info->name);
    covered = info->end;
    previous = info;
  }
  KVC_CHECK(covered == data_size,
            "'{}': {} data bytes after the last tensor belong to no tensor (data section {} bytes)", path_,
            data_size - covered, data_size);
}

namespace {

// A float is NaN or infinite exactly when its exponent bits are all ones, so a masked compare over the
// raw words finds both without converting; the blocked OR-reduction lets the compiler vectorise it.
template <typename Word>
std::optional<uint64_t> first_non_finite(const uint8_t* bytes, uint64_t count, Word exponent_mask) {
  constexpr uint64_t kBlock = 4096;
  for (uint64_t start = 0; start < count; start += kBlock) {
    const uint64_t end = std::min(count, start + kBlock);
    unsigned any = 0;
    for (uint64_t i = start; i < end; ++i) {
      Word word;
      std::memcpy(&word, bytes + i * sizeof(Word), sizeof(Word));
      any |= (word & exponent_mask) == exponent_mask;
    }
    if (!any) continue;
    for (uint64_t i = start; i < end; ++i) {
      Word word;
      std::memcpy(&word, bytes + i * sizeof(Word), sizeof(Word));
      if ((word & exponent_mask) == exponent_mask) return i;
    }
  }
  return std::nullopt;
}

}  // namespace

void SafetensorsFile::check_finite(const std::string& name) const {
  const TensorInfo& tensor = info(name);
  const uint8_t* bytes = data(name);
  const auto count = static_cast<uint64_t>(tensor.numel());
  std::optional<uint64_t> bad;
  switch (tensor.dtype) {
    case DType::F64: bad = first_non_finite<uint64_t>(bytes, count, 0x7ff0000000000000ULL); break;
    case DType::F32: bad = first_non_finite<uint32_t>(bytes, count, 0x7f800000U); break;
    case DType::F16: bad = first_non_finite<uint16_t>(bytes, count, 0x7c00U); break;
    case DType::BF16: bad = first_non_finite<uint16_t>(bytes, count, 0x7f80U); break;
    default: return;
  }
  KVC_CHECK(!bad, "'{}': tensor '{}' holds a non-finite value (NaN or infinity) at element {}", path_, name, *bad);
}

void SafetensorsFile::check_all_finite() const {
  for (const auto& entry : tensors_) check_finite(entry.first);
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> names;
  names.reserve(tensors_.size());
  for (const auto& entry : tensors_) names.push_back(entry.first);
  return names;
}

const TensorInfo& SafetensorsFile::info(const std::string& name) const {
  const auto it = tensors_.find(name);
  KVC_CHECK(it != tensors_.end(), "tensor '{}' not found in '{}'", name, path_);
  return it->second;
}

const uint8_t* SafetensorsFile::data(const std::string& name) const { return data_section_ + info(name).begin; }

}  // namespace kvc::st
