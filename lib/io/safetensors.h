#pragma once
// The safetensors format (https://huggingface.co/docs/safetensors) without LibTorch:
//   [u64 little-endian header length N][N bytes of JSON header][data section]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets within
// the data section) plus an optional "__metadata__" object of strings.
// Reading is zero-copy from a read-only mapping; every malformed input is a one-line kvc::Error.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "io/mapped_file.h"

namespace kvc::st {

// Same limit as the reference implementation: a larger header is treated as corrupt, not parsed.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);  // spelled as in the safetensors spec: "F32", "BF16", ...
// Throws kvc::Error "<context>: unknown dtype '<name>'".
DType parse_dtype(const std::string& name, const std::string& context);

// Bytes a tensor of this dtype and shape occupies; nullopt if a dim is negative or the count overflows.
std::optional<uint64_t> checked_nbytes(DType dtype, const std::vector<int64_t>& shape);

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // offsets within the data section
  int64_t numel() const;
  uint64_t nbytes() const;
};

// A read-only, memory-mapped safetensors file. Pointers from data() live as long as this object, so
// share the shared_ptr with whatever keeps them.
class SafetensorsFile {
 public:
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);  // validates everything

  const std::string& path() const { return path_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;  // throws "tensor 'x' not found in 'path'"
  // Into the mapping. Alignment is only as good as the writer made it: SafetensorsWriter and the
  // reference writer align each tensor to its dtype size; a hand-made file may not.
  const uint8_t* data(const std::string& name) const;
  uint64_t file_size() const { return mapping_.size(); }
  // Throws kvc::Error naming the file and the tensor if a floating-point tensor holds a NaN or an
  // infinity (integer tensors pass). One pass over the bytes; weights and artifacts call it at load.
  void check_finite(const std::string& name) const;
  void check_all_finite() const;

 private:
  explicit SafetensorsFile(const std::string& path);
  // Fills metadata_ and tensors_; returns the header a kvc.checksum covers (the header less that entry, as
  // the writer dumped it), or "" when the file carries none.
  std::string parse_header(const std::string& header_text, uint64_t data_size);
  // As in the reference implementation, the tensors must tile the data section: no overlap, no gap,
  // no bytes after the last one (a file with extra bytes would otherwise be read shifted).
  void check_exact_coverage(uint64_t data_size) const;

  std::string path_;
  MappedFile mapping_;
  const uint8_t* data_section_ = nullptr;
  std::map<std::string, std::string> metadata_;
  std::map<std::string, TensorInfo> tensors_;
};

// Builds a safetensors file in memory and writes it atomically. Tensors are laid out contiguously by
// descending dtype size then name (as the reference writer does), so each starts aligned to its dtype.
class SafetensorsWriter {
 public:
  // Copies the bytes; throws kvc::Error if nbytes != numel * dtype size, a dim is negative, or the
  // name is taken (or is "__metadata__").
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, const void* data, size_t nbytes);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes through kvc::OutputFile: "-" is stdout; pipes, devices and symlinks are written through;
  // a regular file is replaced atomically. The header is space-padded to a multiple of 8 bytes so the
  // data section is 8-aligned. `before_rename` as in OutputFile::commit.
  void write(const std::string& path, const std::function<void()>& before_rename = {}) const;

 private:
  struct Pending {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::map<std::string, Pending> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A model folder: model.safetensors, or shards listed by model.safetensors.index.json
// ({"weight_map": {tensor name: shard file name}}). The single file wins if both exist, as in
// transformers. Opening refuses weights holding NaN or infinities.
class Checkpoint {
 public:
  static Checkpoint open_dir(const std::string& dir);

  bool contains(const std::string& name) const { return file_of_tensor_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  const uint8_t* data(const std::string& name) const;
  std::vector<std::string> names() const;  // sorted
  // The file holding the tensor; keep it to keep data() pointers valid beyond the Checkpoint.
  std::shared_ptr<SafetensorsFile> file_of(const std::string& name) const;

 private:
  explicit Checkpoint(std::string dir) : dir_(std::move(dir)) {}
  void load_index(const std::string& index_path);

  std::string dir_;
  std::map<std::string, std::shared_ptr<SafetensorsFile>> file_of_tensor_;
};

}  // namespace kvc::st
